"""OTCE model configuration.

OTCE (Shi et al., 2024, "OTCE: Hybrid SSM and Attention with Cross Domain Mixture of Experts to construct
Observer-Thinker-Conceiver-Expresser") stacks blocks of a mixer (S = selective SSM with RoPE on B and C,
A = attention) and a feed-forward (M = dense SwiTanhDGLU MLP, E = cross-domain mixture of experts); the last block
may be the Expresser. The decided reading of the paper is docs/otce.md; every choice there is a field here. This
file imports only transformers so that a saved folder loads with `trust_remote_code=True` where yunshan is not
installed.
"""

import math

from transformers import PreTrainedConfig

# Activation names accepted by `hidden_act` (gate branch, SSM conv and the Expresser) and `ffn_up_act` (the V
# branch of every feed-forward). Kept explicit so every name has the same meaning in any transformers release.
OTCE_ACTIVATIONS = ("silu", "gelu", "gelu_tanh", "relu", "tanh", "sigmoid", "identity")
EXPERT_TYPES = ("plain", "cohesive", "expansive")

# Named presets. The paper gives layouts, widths, heads, "groups" and state sizes (Tables 1, 4, 6) but no
# vocabulary or FFN widths; where it is silent we follow the authors' code (vocabulary 65,536, untied embeddings,
# FFN width 4 * hidden). The paper's "Group" is read as transformers' num_key_value_groups (query heads per KV
# head): that reading reproduces the paper's parameter counts (281M, 1B), the other one does not.
OTCE_PRESETS: dict[str, dict] = {
    # Table 1: the 281M model compared with a 283M Jamba (8 layers, hidden 1024, FFN 4096, 16 heads, group 8 =
    # 2 KV heads, state 16), "positional information from the convolution, without RoPE, and without MoE"; Mamba
    # expansion 2 as in Jamba. Counts 281.7M (tests/models/test_otce.py).
    "otce-281m": dict(
        vocab_size=65536, hidden_size=1024, intermediate_size=4096, layer_pattern="SMSMSMSMAMSMSMAM",
        num_attention_heads=16, num_key_value_heads=2, mamba_d_state=16, mamba_expand=2,
        mamba_rope=False, attention_rope=False, use_expresser=True,
    ),
    # Table 6 (ECDMOE): 24 layers, hidden 1024, 16 heads, group 2 = 8 KV heads, state 64, 4 experts, top-2,
    # expansive, shared : private expert parameters 1 : 8 (3*d*1280 shared vs 4 experts * 3*d*2560 private); Mamba
    # expansion 1 as in the authors' code. Counts 1.00B.
    "otce-1b": dict(
        vocab_size=65536, hidden_size=1024, intermediate_size=4096, layer_pattern="SM SE*11 AE*2 SE*8 SM AM",
        num_attention_heads=16, num_key_value_heads=8, mamba_d_state=64, mamba_expand=1,
        num_experts=4, num_experts_per_tok=2, expert_type="expansive",
        expert_intermediate_size=2560, shared_expert_intermediate_size=1280,
    ),
    # For tests and demos: every block kind (dense and expert SSM blocks, an attention MoE block, the Expresser).
    "otce-tiny": dict(
        vocab_size=512, hidden_size=64, intermediate_size=128, layer_pattern="SM SE AE SE AM",
        num_attention_heads=4, num_key_value_heads=2, mamba_d_state=16, num_experts=4, num_experts_per_tok=2,
        expert_type="expansive", expert_intermediate_size=64, shared_expert_intermediate_size=64,
        max_position_embeddings=2048,
    ),
}

_PATTERN_HELP = (
    "write each block as a mixer letter (S = selective SSM, A = attention) followed by a feed-forward letter "
    "(M = dense MLP, E = mixture of experts); blocks may be separated by spaces or '+', and a block or a "
    "parenthesised group may be repeated with *N, e.g. 'SM SE*11 AE*2 SE*8 SM AM' or '(SM SE)*3 AM'"
)


def parse_layer_pattern(pattern: str) -> list[str]:
    """Expand a layer pattern into one two-letter block per layer, e.g. "SM SE*2 AM" -> ["SM", "SE", "SE", "AM"].

    Raises ValueError naming `OtceConfig.layer_pattern`, the character position and what would be valid.
    """
    if not isinstance(pattern, str):
        raise ValueError(f"OtceConfig.layer_pattern={pattern!r} is invalid: must be a string; {_PATTERN_HELP}.")
    text = pattern
    pos = 0

    def fail(message: str):
        raise ValueError(
            f"OtceConfig.layer_pattern={pattern!r} is invalid at character {pos}: {message}; {_PATTERN_HELP}."
        )

    def skip_separators():
        nonlocal pos
        while pos < len(text) and (text[pos].isspace() or text[pos] == "+"):
            pos += 1

    def repeat_count() -> int:
        # After a block or group: optional spaces, then '*' (or the paper's '×') and an integer >= 1.
        nonlocal pos
        look = pos
        while look < len(text) and text[look].isspace():
            look += 1
        if look >= len(text) or text[look] not in "*×":
            return 1
        pos = look + 1
        while pos < len(text) and text[pos].isspace():
            pos += 1
        start = pos
        while pos < len(text) and text[pos].isdigit():
            pos += 1
        if start == pos or int(text[start:pos]) < 1:
            fail("a repeat count after '*' must be an integer >= 1")
        return int(text[start:pos])

    def sequence(depth: int) -> list[str]:
        nonlocal pos
        blocks: list[str] = []
        while True:
            skip_separators()
            if pos >= len(text):
                if depth:
                    fail("'(' is never closed")
                return blocks
            char = text[pos]
            if char == ")":
                if not depth:
                    fail("')' without a matching '('")
                if not blocks:
                    fail("'()' holds no block")
                return blocks
            if char == "(":
                pos += 1
                item = sequence(depth + 1)
                pos += 1  # the closing ')'
            elif char.upper() in "SA":
                pos += 1
                if pos >= len(text) or text[pos].upper() not in "ME":
                    found = repr(text[pos]) if pos < len(text) else "the end of the pattern"
                    fail(f"mixer {char.upper()!r} must be followed by a feed-forward letter M or E, found {found}")
                item = [char.upper() + text[pos].upper()]
                pos += 1
            elif char.upper() in "ME":
                fail(f"feed-forward letter {char!r} must follow a mixer letter S or A")
            else:
                fail(f"unknown letter {char!r} (valid letters: S, A, M, E)")
            blocks.extend(item * repeat_count())

    blocks = sequence(0)
    if not blocks:
        raise ValueError(f"OtceConfig.layer_pattern={pattern!r} is invalid: it holds no block; {_PATTERN_HELP}.")
    return blocks


class OtceConfig(PreTrainedConfig):
    r"""Configuration of an OTCE causal language model.

    LLaMA/Jamba fields keep their transformers names and meanings (`vocab_size`, `hidden_size`,
    `intermediate_size`, `num_attention_heads`, `num_key_value_heads`, `head_dim`, `rope_parameters`,
    `num_experts`, `num_experts_per_tok`, `router_aux_loss_coef`, `output_router_logits`, and Jamba's
    `mamba_d_state`, `mamba_d_conv`, `mamba_expand`, `mamba_dt_rank`, `mamba_conv_bias`, `mamba_proj_bias`).
    `num_hidden_layers` is derived from `layer_pattern` (giving a different value raises).

    Layout:
        layer_pattern (`str`, defaults to the paper's 1B layout "SM SE*11 AE*2 SE*8 SM AM"): one block per layer,
            a mixer letter (S = selective SSM, A = attention) and a feed-forward letter (M = dense MLP, E = mixture
            of experts), with `*N` repetition of a block or a parenthesised group. At least one A is required: the
            cache counts past tokens in attention layers.
        use_expresser (`bool`, defaults to True): the last block is the Expresser (docs/otce.md): after its
            attention and feed-forward, `h = W_proj(SiLU(W_dense(RMSNorm(h) + block_input)))`, no residual.
            Requires the last block's mixer to be A. W_dense and W_proj are hidden -> hidden (the authors' code).

    Selective SSM (Mamba-1 with RoPE on B and C):
        mamba_d_state (`int`, defaults to 64): N, the state size per channel (16 in the paper's Tables 1 and 4).
        mamba_expand (`int`, defaults to 1): d_inner = mamba_expand * hidden_size.
        mamba_dt_rank (`int` or "auto"): rank of the dt projection; "auto" = ceil(hidden_size / 16).
        mamba_use_conv (`bool`, defaults to True): the causal depthwise convolution and its SiLU before x_proj.
            Off removes both (paper section 4.3).
        mamba_d_conv (`int`, defaults to 4): convolution kernel size.
        mamba_conv_bias (`bool`, defaults to False), mamba_proj_bias (`bool`, defaults to False): biases of the
            convolution and of in_proj/out_proj (the paper uses no linear biases; Jamba's conv has one).
        mamba_rope (`bool`, defaults to True): rotate-half RoPE of dimension N on B and C after their RMSNorms,
            with the attention's position ids and `rope_theta` (always the default, unscaled RoPE).
        mamba_use_d (`bool`, defaults to True): the D skip connection (ones at init).
        mamba_dt_min, mamba_dt_max, mamba_dt_init_floor (`float`): Mamba's initialisation of dt_proj's bias
            (dt log-uniform in [dt_min, dt_max], floored).
        mamba_chunk_size (`int`, defaults to 0): the training scan. 1 = per-step recurrence; N > 1 = the chunked
            parallel scan (chunks of N steps computed at once, then a carry across chunks); 0 = automatic: per-step
            on CPU (measured fastest there, see benchmarks/README.md) and chunks of 64 on accelerators. All give the
            same numbers up to float rounding.

    Attention:
        attention_rope (`bool`, defaults to True): RoPE on queries and keys (grouped-query attention, eager or SDPA).

    Feed-forward (every M block, every expert and the shared FFN is `W2(act(x W) * up_act(x V))`):
        ffn_up_act (`str`, defaults to "tanh"): the V-branch activation. "tanh" = SwiTanhDGLU (paper Eq. 13b),
            "sigmoid" = SwiSigDGLU (Eq. 13a), "identity" = SwiGLU (LLaMA, Jamba). Valid: `OTCE_ACTIVATIONS`.
        expert_type (`str`, defaults to "expansive"): "plain" = independent experts (Mixtral/Jamba; with
            `shared_expert_intermediate_size > 0` also an always-on shared expert, the DeepSeekMoE baseline),
            "cohesive" = the V projection is shared by all experts (Eq. 18), "expansive" = a shared FFN computed once
            per token feeds each routed expert through a per-expert gate `sigmoid(s . w3_i)` (Eq. 19, with the
            sigmoid of the authors' code).
        num_experts (`int`, defaults to 4), num_experts_per_tok (`int`, defaults to 2): routed experts and top-k. The
            router is a linear map d -> num_experts, softmax in float32, top-k weights not renormalised.
        expert_intermediate_size (`int`, optional): width of each routed expert; defaults to `intermediate_size`
            for plain experts and `intermediate_size // 2` for cohesive and expansive ones (the authors' code).
        shared_expert_intermediate_size (`int`, optional): width of the shared FFN (expansive; defaults to
            `intermediate_size`), of the shared expert (plain; defaults to 0 = none). Cohesive experts share V, so
            it is always `expert_intermediate_size` there.
        router_aux_loss_coef (`float`, defaults to 0.001): weight of the load-balancing loss (Switch/Mixtral form,
            padding excluded) added to the loss whenever labels are given.
    """

    model_type = "otce"
    keys_to_ignore_at_inference = ["past_key_values"]
    base_model_pp_plan = {
        "embed_tokens": (["input_ids"], ["inputs_embeds"]),
        "layers": (["hidden_states", "attention_mask"], ["hidden_states"]),
        "norm": (["hidden_states"], ["hidden_states"]),
    }
    attribute_map = {"num_local_experts": "num_experts"}

    vocab_size: int = 65536
    hidden_size: int = 1024
    intermediate_size: int = 4096
    num_hidden_layers: int | None = None
    num_attention_heads: int = 16
    num_key_value_heads: int | None = 2
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 8192
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-6
    use_cache: bool = True
    pad_token_id: int | None = None
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    tie_word_embeddings: bool = False
    rope_parameters: dict | None = None
    attention_dropout: float = 0.0

    layer_pattern: str = "SM SE*11 AE*2 SE*8 SM AM"
    use_expresser: bool = True

    mamba_d_state: int = 64
    mamba_d_conv: int = 4
    mamba_expand: int = 1
    mamba_dt_rank: int | str = "auto"
    mamba_use_conv: bool = True
    mamba_conv_bias: bool = False
    mamba_proj_bias: bool = False
    mamba_rope: bool = True
    mamba_use_d: bool = True
    mamba_dt_min: float = 0.001
    mamba_dt_max: float = 0.1
    mamba_dt_init_floor: float = 1e-4
    mamba_chunk_size: int = 0

    attention_rope: bool = True

    ffn_up_act: str = "tanh"
    expert_type: str = "expansive"
    num_experts: int = 4
    num_experts_per_tok: int = 2
    expert_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    router_aux_loss_coef: float = 0.001
    output_router_logits: bool = False

    def __post_init__(self, **kwargs):
        blocks = parse_layer_pattern(self.layer_pattern)
        if self.num_hidden_layers is None:
            self.num_hidden_layers = len(blocks)
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None and self.num_attention_heads and self.hidden_size % self.num_attention_heads == 0:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.mamba_dt_rank == "auto":
            self.mamba_dt_rank = math.ceil(self.hidden_size / 16)
        if self.expert_intermediate_size is None:
            plain = self.expert_type == "plain"
            self.expert_intermediate_size = self.intermediate_size if plain else self.intermediate_size // 2
        if self.shared_expert_intermediate_size is None:
            self.shared_expert_intermediate_size = {
                "plain": 0, "expansive": self.intermediate_size,
            }.get(self.expert_type, self.expert_intermediate_size)
        super().__post_init__(**kwargs)
        self.check_otce_fields(blocks)

    def check_otce_fields(self, blocks: list[str] | None = None):
        """Raise ValueError naming the first invalid field and what would be valid."""

        def bad(field, value, valid):
            raise ValueError(f"OtceConfig.{field}={value!r} is invalid: {valid}.")

        blocks = blocks if blocks is not None else parse_layer_pattern(self.layer_pattern)
        for field in ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "mamba_d_state",
                      "mamba_expand", "mamba_dt_rank", "num_experts", "num_experts_per_tok"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                bad(field, value, "must be an integer >= 1")
        if self.num_hidden_layers != len(blocks):
            bad("num_hidden_layers", self.num_hidden_layers,
                f"must equal the number of blocks in layer_pattern={self.layer_pattern!r} ({len(blocks)}); "
                "leave it unset to derive it")
        if not any(block[0] == "A" for block in blocks):
            bad("layer_pattern", self.layer_pattern,
                "must contain at least one attention block (A): the cache counts past tokens in attention layers")
        if self.use_expresser and blocks[-1][0] != "A":
            bad("use_expresser", self.use_expresser,
                f"needs the last block of layer_pattern to be an attention block (AM or AE), not {blocks[-1]!r}; "
                "set use_expresser=False for layouts that end in an SSM block (such as Jamba's)")
        if self.hidden_size % self.num_attention_heads != 0 and self.head_dim is None:
            bad("hidden_size", self.hidden_size,
                f"must be divisible by num_attention_heads={self.num_attention_heads} (or give head_dim)")
        if not isinstance(self.num_key_value_heads, int) or self.num_key_value_heads < 1:
            bad("num_key_value_heads", self.num_key_value_heads, "must be an integer >= 1")
        if self.num_attention_heads % self.num_key_value_heads != 0:
            bad("num_key_value_heads", self.num_key_value_heads,
                f"must divide num_attention_heads={self.num_attention_heads} (grouped-query attention)")
        if not isinstance(self.head_dim, int) or self.head_dim < 1 or (self.attention_rope and self.head_dim % 2):
            bad("head_dim", self.head_dim, "must be an integer >= 1, even when attention_rope (RoPE rotates pairs)")
        if self.mamba_rope and self.mamba_d_state % 2:
            bad("mamba_d_state", self.mamba_d_state, "must be even when mamba_rope is on (RoPE rotates pairs)")
        if self.mamba_use_conv and (not isinstance(self.mamba_d_conv, int) or self.mamba_d_conv < 2):
            bad("mamba_d_conv", self.mamba_d_conv, "must be an integer >= 2 (or set mamba_use_conv=False)")
        if not isinstance(self.mamba_chunk_size, int) or self.mamba_chunk_size < 0:
            bad("mamba_chunk_size", self.mamba_chunk_size, "must be an integer >= 0 (0 = automatic, 1 = per step)")
        if not 0 < self.mamba_dt_min <= self.mamba_dt_max:
            bad("mamba_dt_min", self.mamba_dt_min, f"must be > 0 and <= mamba_dt_max={self.mamba_dt_max}")
        for field in ("hidden_act", "ffn_up_act"):
            if getattr(self, field) not in OTCE_ACTIVATIONS:
                bad(field, getattr(self, field), f"must be one of {', '.join(OTCE_ACTIVATIONS)}")
        if self.expert_type not in EXPERT_TYPES:
            bad("expert_type", self.expert_type, f"must be one of {', '.join(EXPERT_TYPES)}")
        if self.num_experts_per_tok > self.num_experts:
            bad("num_experts_per_tok", self.num_experts_per_tok,
                f"must be <= num_experts={self.num_experts} (top-k picks among the experts)")
        if not isinstance(self.expert_intermediate_size, int) or self.expert_intermediate_size < 1:
            bad("expert_intermediate_size", self.expert_intermediate_size, "must be an integer >= 1")
        shared = self.shared_expert_intermediate_size
        if not isinstance(shared, int) or shared < 0:
            bad("shared_expert_intermediate_size", shared, "must be an integer >= 0")
        if self.expert_type == "cohesive" and shared != self.expert_intermediate_size:
            bad("shared_expert_intermediate_size", shared,
                f"must equal expert_intermediate_size={self.expert_intermediate_size} for cohesive experts (the "
                "shared V multiplies each expert's W branch elementwise)")
        if self.expert_type == "expansive" and shared < 1:
            bad("shared_expert_intermediate_size", shared, "must be >= 1 for expansive experts (the shared FFN)")
        if not float(self.router_aux_loss_coef) >= 0:
            bad("router_aux_loss_coef", self.router_aux_loss_coef, "must be >= 0")
        if not 0.0 <= float(self.attention_dropout) < 1.0:
            bad("attention_dropout", self.attention_dropout, "must be in [0, 1)")
        if not self.rms_norm_eps > 0:
            bad("rms_norm_eps", self.rms_norm_eps, "must be > 0")

    @property
    def layers_block_type(self) -> list[str]:
        """One two-letter block per layer ("SM", "SE", "AM", "AE"), expanded from `layer_pattern`."""
        return parse_layer_pattern(self.layer_pattern)

    @property
    def layer_types(self) -> list[str]:
        # The cache layer type per decoder layer: SSM layers keep a convolution and a recurrent state
        # ("linear_attention" in transformers' Cache classes), attention layers keep keys and values.
        return ["full_attention" if block[0] == "A" else "linear_attention" for block in self.layers_block_type]

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "OtceConfig":
        """Build a config from a named preset (`otce-1b`, `otce-281m`, `otce-tiny`) plus field overrides."""
        if name not in OTCE_PRESETS:
            raise ValueError(f"unknown OTCE preset {name!r}; valid presets: {', '.join(OTCE_PRESETS)}")
        return cls(**{**OTCE_PRESETS[name], **overrides})


__all__ = ["EXPERT_TYPES", "OTCE_ACTIVATIONS", "OTCE_PRESETS", "OtceConfig", "parse_layer_pattern"]
