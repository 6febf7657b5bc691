"""A stand-in for an LLM router behind the gateway (test/e2e-router.test.ts).

It binds `model` the way LiteLLM's proxy does, and answers with the models it would run instead
of running them:
  - each chat/completions/embeddings handler takes `model: Optional[str] = None`; on routes with a
    `{model}` path segment (Azure-style /openai/deployments/{model}/..., legacy /engines/{model}/...)
    FastAPI fills it from the path, elsewhere from a `model` query parameter;
  - the bound `model` wins over the body: `model or data.get("model")`;
  - a comma-separated model is split and every name is run (LiteLLM's batch completion);
  - Gemini's /models/{model}:generateContent is served with and without a version segment;
  - a batch runs the models named inside its input file, which the stand-in cannot know: it
    answers "<batch>".
"""
import json
from typing import Optional

from fastapi import FastAPI, Request

app = FastAPI()


async def body_json(request: Request) -> dict:
    raw = await request.body()
    if not raw:
        return {}
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


def runs(chosen) -> dict:
    if not isinstance(chosen, str) or chosen == "":
        return {"ran": []}
    if "," in chosen:
        return {"ran": [m.strip() for m in chosen.split(",")]}
    return {"ran": [chosen]}


@app.get("/health")
async def health():
    return {"ok": True}


# Decorators register bottom-up: the `{model:path}/completions` routes come last, so that
# `/engines/x/chat/completions` is the chat route (as in LiteLLM, whose chat routes come first).
@app.post("/engines/{model:path}/completions")
@app.post("/v1/engines/{model:path}/completions")
@app.post("/openai/deployments/{model:path}/chat/completions")
@app.post("/engines/{model:path}/chat/completions")
@app.post("/openai/deployments/{model:path}/embeddings")
@app.post("/engines/{model:path}/embeddings")
@app.post("/v1/chat/completions")
@app.post("/chat/completions")
@app.post("/v1/embeddings")
@app.post("/v1/messages")
async def openai_like(request: Request, model: Optional[str] = None):
    data = await body_json(request)
    return runs(model or data.get("model"))


@app.post("/v1beta/models/{model_name}:generateContent")
@app.post("/models/{model_name}:generateContent")
async def gemini(request: Request, model_name: str):
    return runs(model_name)


@app.post("/v1/batches")
@app.post("/batches")
async def batches(request: Request):
    return {"ran": ["<batch>"]}
