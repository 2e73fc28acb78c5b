"""What a browser tab does on the labelling page, over plain HTTP: open the page (the server issues the tab its
token), read the pair and the form's hidden fields, post a grade as the page's form does (its Origin the page's
own), or as another site would."""
from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def origin_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def get(url: str, headers: dict | None = None) -> tuple[int, str, str]:
    """(status, body, Location) of a GET, redirects not followed."""
    try:
        with OPENER.open(urllib.request.Request(url, headers=headers or {}), timeout=30) as answer:
            return answer.status, answer.read().decode(), answer.headers.get("Location", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers.get("Location", "")


def post(url: str, headers: dict | None = None, **form) -> tuple[int, str]:
    """(status, Location, or the body when there is none) of a form post; by default with the Origin of ``url``
    itself, as the page's own form sends it (``headers`` replace it)."""
    data = urllib.parse.urlencode(form).encode()
    sent = {"Origin": origin_of(url)} if headers is None else headers
    try:
        with OPENER.open(urllib.request.Request(url, data=data, method="POST", headers=sent), timeout=30) as answer:
            return answer.status, answer.headers.get("Location", "") or answer.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Location", "") or e.read().decode()


def shown_pair(page: str) -> int:
    return int(re.search(r'name="pair" value="(\d+)"', page).group(1))


def hidden(page: str, name: str) -> str:
    return re.search(rf'name="{name}" value="([^"]*)"', page).group(1)


@dataclass
class Tab:
    base: str  # the page's address, ending in /
    tab: str
    secret: str
    page: str

    @property
    def pair(self) -> int:
        return shown_pair(self.page)

    def grade(self, grade, pair: int | None = None, headers: dict | None = None) -> tuple[int, str]:
        return post(self.base + "grade", headers, tab=self.tab, secret=self.secret,
                    pair=self.pair if pair is None else pair, grade=grade)

    def reload(self) -> "Tab":
        self.page = get(f"{self.base}?tab={self.tab}")[1]
        return self


def open_tab(base: str) -> Tab:
    """A new tab on the page at ``base``: the token the server issues, its form secret and the pair shown."""
    status, _, where = get(base)
    assert status == 303 and where.startswith("/?tab="), (status, where)
    page = get(base.rstrip("/") + where)[1]
    return Tab(base, where.split("=", 1)[1], hidden(page, "secret"), page)
