"""`yunshan serve`: an OpenAI-compatible HTTP server over a model folder, a run, an export or a LoRA adapter.

    yunshan serve runs/demo_tiny                       # http://127.0.0.1:8000/v1 (chat/completions, completions, models)

`command.py` is the command (flags, loading, uvicorn), `app.py` the FastAPI routes, `protocol.py` the request schemas
and the OpenAI-shaped errors and responses, `engine.py` the generation worker that batches queued requests,
`token_bound.py` the fewest tokens a prompt can take (a prompt far over the context is refused before tokenising).
"""
