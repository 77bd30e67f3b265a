"""What every command's arguments dataclass stands on: the rules its fields declare, its flags, its recipe file.

`field_rules.py` applies what a field declares in its metadata (`path`: `~` and variables expanded; `range`) in the
dataclass's `__post_init__`, however it is built; `flags.py` generates a flag command's flags from its dataclass and
reads them back; `recipe.py` loads a recipe command's YAML (line numbers, `${variables}`, dotted overrides, unknown
keys rejected by full path). None of them knows a command or a stage: the commands import them, never the reverse.
"""
