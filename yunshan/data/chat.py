"""Chat formatting for SFT: render a conversation with the tokenizer's chat template and mark the tokens the loss
is computed on (every assistant turn, and the end-of-turn token after it; everything else -100).

The whole conversation is rendered and tokenised once, exactly as inference would see it, and the assistant
spans are found by rendering prefixes: `render(messages[:i], add_generation_prompt=True)` ends where assistant
turn i begins and `render(messages[:i+1])` ends after its end-of-turn marker. Tokens are labelled by their
character offsets, so no template needs special `{% generation %}` markers. A template that is not
prefix-stable (rendering a prefix of the conversation is not a prefix of the rendering) is rejected with a clear
error. The turn's end-of-turn marker (EOS in yunshan's template, e.g. <|im_end|> in ChatML) is trained too; when a
template emits nothing after an assistant message, the tokenizer's EOS is appended to the turn so the model
learns to stop. The markers are returned so generation can stop on them.

Tokenizers without a chat template get yunshan's default template (below), which is saved with the trained model
so inference uses what training used.
"""

from __future__ import annotations

from dataclasses import dataclass

# yunshan's default template: plain role headers, EOS closing every assistant turn.
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}<|system|>\n{{ message['content'] }}\n"
    "{% elif message['role'] == 'user' %}<|user|>\n{{ message['content'] }}\n"
    "{% elif message['role'] == 'assistant' %}<|assistant|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


class TemplateError(ValueError):
    """The chat template cannot be used: it fails on a conversation, or cannot be used for loss masking."""


def ensure_chat_template(tokenizer) -> bool:
    """Give the tokenizer yunshan's default template if it has none. Returns True when it was added."""
    if getattr(tokenizer, "chat_template", None):
        return False
    tokenizer.chat_template = DEFAULT_CHAT_TEMPLATE
    return True


def render(tokenizer, messages: list[dict], add_generation_prompt: bool = False) -> str:
    """The conversation as the tokenizer's chat template writes it. A template that fails (Jinja's TemplateError:
    its own `raise_exception`, such as Gemma's "System role not supported", a syntax error, an undefined name) is a
    one-line TemplateError naming the tokenizer, never a traceback."""
    import jinja2

    try:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    except jinja2.TemplateError as err:
        name = getattr(tokenizer, "name_or_path", "") or "the tokenizer"
        raise TemplateError(f"{name}: the chat template fails on this conversation ({type(err).__name__}: "
                            f"{' '.join(str(err).split())}); fix chat_template in tokenizer_config.json") from None


@dataclass
class Encoded:
    input_ids: list[int]
    labels: list[int]
    assistant_spans: list[tuple[int, int]]  # token [start, end) of each assistant turn (label span)
    end_markers: set[int]  # ids that close assistant turns (EOS or the template's end-of-turn token)


def encode_conversation(tokenizer, messages: list[dict]) -> Encoded:
    """Token ids and labels (assistant turns only) of one conversation."""
    full = render(tokenizer, messages)
    spans = []  # character spans of assistant turns incl. their end-of-turn marker
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(tokenizer, messages[:i], add_generation_prompt=True)
        through = render(tokenizer, messages[: i + 1])
        if not full.startswith(before) or not full.startswith(through):
            raise TemplateError(
                "the chat template is not prefix-stable (rendering the first turns of a conversation is not a "
                "prefix of rendering all of it), so assistant turns cannot be located; use a template that renders "
                "turns independently, or remove it to use yunshan's default"
            )
        start = full.find(message["content"], len(before))
        if start < 0:
            raise TemplateError("the chat template changed an assistant message's text; cannot locate it")
        end = len(through.rstrip())  # the turn, its end-of-turn marker; not the whitespace after it
        spans.append((start, max(end, start + len(message["content"])), start + len(message["content"])))
    enc = tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    labels = [-100] * len(ids)
    token_spans = []
    insert_eos_after = []
    for start, end, content_end in spans:
        first = last = None
        for t, (a, b) in enumerate(offsets):
            # A token belongs to the turn if it overlaps it (byte-level BPE glues a leading space to a word).
            if a < end and b > start:
                labels[t] = ids[t]
                first = t if first is None else first
                last = t
        if first is None:
            raise TemplateError("an assistant turn produced no tokens")
        token_spans.append((first, last + 1))
        if not full[content_end:end].strip():  # the template closes the turn with nothing: add EOS
            insert_eos_after.append(len(token_spans) - 1)
    # Templates that emit nothing after an assistant turn: append EOS to the turn (ids and labels).
    for k in reversed(insert_eos_after):
        at = token_spans[k][1]
        ids.insert(at, tokenizer.eos_token_id)
        labels.insert(at, tokenizer.eos_token_id)
        for j in range(k + 1, len(token_spans)):
            token_spans[j] = (token_spans[j][0] + 1, token_spans[j][1] + 1)
        token_spans[k] = (token_spans[k][0], token_spans[k][1] + 1)
    end_markers = {ids[b - 1] for _, b in token_spans}
    return Encoded(ids, labels, token_spans, end_markers)


def fit_to_length(enc: Encoded, max_length: int, policy: str) -> tuple[Encoded | None, str | None]:
    """Make a sample fit `max_length` without ever cutting inside an answer that is trained on.

    `truncate_prompt` drops tokens from the left (the oldest turns); an earlier assistant turn that the cut reaches
    is then not trained on at all. If the last assistant turn (with its prompt's final token) does not fit, or the
    policy is `drop`, the sample is dropped. Returns (sample or None, reason counted or None)."""
    n = len(enc.input_ids)
    if n <= max_length:
        return enc, None
    if policy == "drop":
        return None, "too_long"
    cut = n - max_length
    last_start = enc.assistant_spans[-1][0]
    if last_start - cut < 1:  # the final answer (and at least one prompt token before it) does not fit
        return None, "answer_too_long"
    ids = enc.input_ids[cut:]
    labels = list(enc.labels[cut:])
    spans = []
    for a, b in enc.assistant_spans:
        if a < cut:  # partly cut: never train on part of an answer
            for t in range(max(a, cut), b):
                labels[t - cut] = -100
            continue
        spans.append((a - cut, b - cut))
    return Encoded(ids, labels, spans, enc.end_markers), "truncated_prompt"
