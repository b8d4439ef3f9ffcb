"""The playground in headless Chromium: a Devanagari query typed with the language left to detection is
translated before retrieval and answered with a prompt that says Hindi; a response that copies the system
prompt is flagged as a prompt echo, in the playground and, once saved, in the response browser.

The model is a local OpenAI-compatible server (this module's own, in a thread) that answers a generation
request with its system prompt word for word — the regurgitation Health-Pariksha saw (§4.1) — and a
translation request with a fixed English sentence; it records every request, so the test reads the prompt
the page built. The app is `streamlit run app.py` on a copy of the pipeline's database.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import duckdb
import pytest
import yaml

from pipeline.steps.generate import prompt_hash
from tests.support.browser import ARTIFACTS, BROWSER, REPO, main_text, no_exception, serve_app, settle
from tests.support.results_db import copy_results_db

ECHO = "openai-compatible/echo"
HINDI_QUERY = "ऑपरेशन के बाद सिर कब धो सकते हैं?"
ENGLISH = "When can I wash my hair after the operation?"
pytestmark = BROWSER


class EchoModel(BaseHTTPRequestHandler):
    """Chat completions: translation requests get ``ENGLISH``; any other request its system prompt, verbatim."""

    requests: ClassVar[list[dict]] = []

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).requests.append(body)
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        text = ENGLISH if system.startswith("You translate a patient's message") else system
        if body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for i in range(0, len(text), 40):
                delta = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "echo",
                         "choices": [{"index": 0, "delta": {"content": text[i:i + 40]}, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(delta)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            return
        payload = json.dumps({"id": "c", "object": "chat.completion", "created": 0, "model": "echo",
                              "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                           "finish_reason": "stop"}],
                              "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def served(pipeline_db: Path, echo_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The app on a copy of the pipeline's database (and its index), the echo model as generator and translator."""
    folder = tmp_path_factory.mktemp("browser-playground")
    db = copy_results_db(pipeline_db, folder / pipeline_db.name)
    config = folder / "playground.yaml"
    echo = {"id": ECHO, "base_url": echo_url, "max_tokens": 64}
    config.write_text(yaml.safe_dump({
        "name": "browser-playground", "dataset": str(REPO / "data" / "cataract"), "db": str(db),
        "retrieval": {"top_k": 1, "split": "separate", "top_k_updates": 1},
        "models": [echo], "translator": echo}))
    with serve_app(db, env={"PARIKSHA_CONFIG": str(config)}) as url:
        yield url, db


def test_devanagari_query_is_answered_with_a_hindi_prompt_and_an_echo_is_flagged(served, page):
    url, db = served
    EchoModel.requests.clear()
    page.goto(f"{url}/playground")
    settle(page)
    box = page.get_by_role("textbox", name="Query", exact=True)
    box.fill(HINDI_QUERY)
    box.press("Control+Enter")  # commit the text (as leaving the box does)
    settle(page)
    assert "Detected: Hindi (hi)" in main_text(page)
    page.get_by_role("button", name="Generate").click()
    page.get_by_text("Language: Hindi (hi)").wait_for(timeout=180_000)  # drawn by the rerun after the answers
    settle(page, 180)
    no_exception(page)
    text = main_text(page)
    assert "Language: Hindi (hi)" in text
    assert f"machine-translated before retrieval by {ECHO}" in text and ENGLISH in text
    assert "Prompt echo: the response repeats" in text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "playground-hindi-echo.png"), full_page=True)

    # the request the page built: translated first, then a prompt that says Hindi, retrieval on the English text
    translation, generation = EchoModel.requests[0], EchoModel.requests[-1]
    assert translation["messages"][-1]["content"] == HINDI_QUERY
    system = generation["messages"][0]["content"]
    assert "The provided query is in Hindi, and you must always respond in Hindi." in system
    assert HINDI_QUERY in generation["messages"][-1]["content"]
    page.locator('[data-testid="stExpander"] summary').filter(has_text="Prompt sent to").first.click()
    page.wait_for_timeout(300)
    assert "The provided query is in Hindi" in main_text(page)

    page.get_by_role("button", name="Save to the database").click()
    page.get_by_text("Saved:").wait_for(timeout=90_000)
    settle(page)
    no_exception(page)
    with duckdb.connect(str(db), read_only=True) as con:
        stored_hash, text_saved = con.execute("SELECT prompt_hash, text FROM responses "
                                              "WHERE dataset = 'playground'").fetchone()
        language, query_en, source = con.execute("SELECT language, query_en, query_en_source FROM queries "
                                                 "WHERE dataset = 'playground'").fetchone()
        echo = con.execute("SELECT passed, detail FROM safety_checks WHERE dataset = 'playground' "
                           "AND check_name = 'prompt_echo'").fetchone()
        searched = con.execute("SELECT search_text FROM retrievals WHERE dataset = 'playground'").fetchone()[0]
    assert stored_hash == prompt_hash(generation["messages"])  # the saved prompt is the one the model was sent
    assert text_saved == system.strip()
    assert (language, query_en, source) == ("hi", ENGLISH, "machine")
    assert echo[0] is False and "system prompt" in echo[1]
    assert searched == ENGLISH

    # the response browser shows the saved answer with its flag and the machine rendering marked as such
    page.goto(f"{url}/responses?dataset=playground")
    settle(page)
    no_exception(page)
    text = main_text(page)
    assert "Prompt echo: the response repeats" in text
    assert f"English rendering by {ECHO} (machine-made, not checked by a person)" in text and ENGLISH in text
    page.screenshot(path=str(ARTIFACTS / "responses-playground-echo.png"), full_page=True)
