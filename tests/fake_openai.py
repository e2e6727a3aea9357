"""A small OpenAI-compatible HTTP server for tests: the real `openai` client talks to it.

Each request (/v1/chat/completions or /v1/embeddings) takes the next scripted behaviour:
`("ok", text)`, `("status", code)`, `("sleep", seconds)` or `("tools", [(id, name,
arguments), ...])` (the model calls those tools: `tool_calls`, streamed as
OpenAI streams them, in fragments); when the script runs out, it answers "ok"
with `default_text`. Requests are recorded. While `gate` is a cleared
`threading.Event`, every request waits for it to be set.
A structured call (`response_format` a JSON schema: the facts extractor's) is the
other kind a model server answers: it takes the next of `facts_script` instead,
answering `{"facts": []}` when that runs out, and is recorded in
`fact_requests`, so that the facts pass that follows a turn neither takes a
chat reply's scripted behaviour nor counts among its requests.
Embeddings have `embedding_dim` floats, or N for a model named "...-<N>d"
(e.g. "fake-embed-768d"), as real embedding models differ in dimension.
"""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NO_FACTS = '{"facts": []}'


class FakeOpenAI:
    def __init__(
        self, default_text: str = "A reply from the fake model.", chunk_delay: float = 0.0, embedding_dim: int = 8
    ):
        self.script: list[tuple] = []
        self.embedding_dim = embedding_dim
        self.chunk_delay = chunk_delay
        self.requests: list[dict] = []
        self.facts_script: list[tuple] = []
        self.fact_requests: list[dict] = []
        self.default_text = default_text
        self.gate: threading.Event | None = None
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                structured = (body.get("response_format") or {}).get("type") == "json_schema"
                script, default = (fake.facts_script, NO_FACTS) if structured else (fake.script, fake.default_text)
                with fake._lock:
                    (fake.fact_requests if structured else fake.requests).append({"path": self.path, "body": body})
                    step = script.pop(0) if script else ("ok", default)
                    gate = fake.gate
                if gate is not None:
                    gate.wait(60)
                if step[0] == "sleep":
                    time.sleep(step[1])
                    step = ("ok", default)
                if step[0] == "status":
                    self._json(step[1], {"error": {"message": f"scripted {step[1]}", "type": "test"}})
                elif step[0] == "tools" and body.get("stream"):
                    self._stream_calls(step[1])
                elif step[0] == "tools":
                    self._json(200, _calls_completion(step[1]))
                elif self.path.endswith("/embeddings"):
                    sized = _MODEL_DIM.search(str(body.get("model", "")))
                    self._json(200, _embeddings(body["input"], int(sized.group(1)) if sized else fake.embedding_dim))
                elif body.get("stream"):
                    self._stream(step[1])
                else:
                    self._json(200, _completion(step[1]))

            def _json(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, text):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                words = text.split(" ")
                for i, word in enumerate(words):
                    chunk = _completion(word if i == len(words) - 1 else word + " ", stream=True)
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(fake.chunk_delay)
                self.wfile.write(b"data: [DONE]\n\n")

            def _stream_calls(self, calls):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                deltas = [{"role": "assistant", "content": None}]
                for index, (call_id, name, arguments) in enumerate(calls):
                    function = {"name": name, "arguments": ""}
                    deltas.append(
                        {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]}
                    )
                    for start in range(0, len(arguments), 5):
                        piece = {"index": index, "function": {"arguments": arguments[start : start + 5]}}
                        deltas.append({"tool_calls": [piece]})
                for number, delta in enumerate(deltas):
                    finish = "tool_calls" if number == len(deltas) - 1 else None
                    chunk = {
                        "id": "chatcmpl-test",
                        "object": "chat.completion.chunk",
                        "created": int(time.time()),
                        "model": "fake-model",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


_MODEL_DIM = re.compile(r"-(\d{1,5})d$")


def _completion(text: str, stream: bool = False) -> dict:
    choice = {"index": 0, "finish_reason": None if stream else "stop"}
    if stream:
        choice["delta"] = {"role": "assistant", "content": text}
    else:
        choice["message"] = {"role": "assistant", "content": text}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk" if stream else "chat.completion",
        "created": int(time.time()),
        "model": "fake-model",
        "choices": [choice],
    }


def _calls_completion(calls: list[tuple[str, str, str]]) -> dict:
    tool_calls = [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        for call_id, name, arguments in calls
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fake-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
    }


def _embeddings(texts: list[str], dim: int) -> dict:
    # Deterministic, distinct per text; returned out of order, as the API allows.
    data = []
    for index, text in enumerate(texts):
        vector = [float((len(text) * (i + 1) + index) % 7 + 1) for i in range(dim)]
        data.append({"object": "embedding", "index": index, "embedding": vector})
    return {"object": "list", "data": data[::-1], "model": "fake-embedding"}
