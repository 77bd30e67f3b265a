"""Loading a model, one path for every command: `pretrained.py` (a folder or Hub id resolved and checked,
`from_pretrained` with remote code refused unless opted in, the context length), `hub_download.py` (a Hub id at a
revision to a folder of the HF cache), `remote_code.py` (a folder's own code runs only on the user's opt-in),
`precision.py` (the one precision vocabulary and the hardware's choice). Training, evaluation, chat and serve keep
only what differs.
"""
