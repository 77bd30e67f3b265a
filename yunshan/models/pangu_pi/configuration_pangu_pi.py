"""PanGu-π model configuration.

PanGu-π (Wang et al., 2023, "PanGu-π: Enhancing Language Model Architectures via Nonlinearity Compensation") is a
LLaMA-style decoder with two additions: a series informed activation function (SIAF) on the SwiGLU gate branch
and augmented shortcuts parallel to attention. Decided readings of the paper are in docs/pangu-pi.md; every one of
them is a field here. This file imports only torch/transformers so that a saved folder loads with
`trust_remote_code=True` where yunshan is not installed.
"""

from transformers import PreTrainedConfig

# Activation names accepted in `siaf_activations`; kept explicit (rather than all of transformers' ACT2FN) so that
# the set is stable across transformers releases and every name has a well-defined value and gradient at 0.
SIAF_ACTIVATIONS = ("silu", "gelu", "gelu_tanh", "relu", "tanh", "sigmoid", "mish", "identity")

# Named presets (paper Table 1; vocabulary from Table 7). The paper gives no FFN width: we follow LLaMA's rule
# (8/3 * hidden rounded up to a multiple of 256), which gives LLaMA-7B's 11008 at hidden 4096.
PANGU_PI_PRESETS: dict[str, dict] = {
    "pangu-pi-7b": dict(
        vocab_size=100883, hidden_size=4096, intermediate_size=11008, num_hidden_layers=29,
        num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
    ),
    "pangu-pi-1b": dict(
        vocab_size=100883, hidden_size=2048, intermediate_size=5632, num_hidden_layers=12,
        num_attention_heads=16, num_key_value_heads=16, max_position_embeddings=4096,
    ),
    # For tests and demos: small enough to train on a CPU in seconds, still exercises GQA and both additions.
    "tiny": dict(
        vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512, aug_reduction=8,
    ),
}


class PanguPiConfig(PreTrainedConfig):
    r"""Configuration of a PanGu-π causal language model.

    LLaMA fields keep their transformers names and meanings (`hidden_size`, `intermediate_size`,
    `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads`, `head_dim`, `rope_parameters`, ...).

    PanGu-π fields:
        siaf_terms (`int`, defaults to 2): n, the number of activations summed in the series (paper Eq. 7);
            1 is the plain activation.
        siaf_activations (`list[str]`, optional): one activation name per term (or a single name for all);
            defaults to `hidden_act` for every term. Valid names: `SIAF_ACTIVATIONS`.
        siaf_scale_by_n (`bool`, defaults to False): divide the series by n.
        siaf_neighbor_kernel (`int`, defaults to 1): kernel of the causal depthwise convolution over the token
            axis applied after the series (VanillaNet's "learn from neighbours"); 1 turns it off; odd values only.
        aug_shortcuts (`int`, defaults to 1): T, the number of augmented shortcuts parallel to attention; 0 = off.
        aug_reduction (`int`, defaults to 32): r, the bottleneck reduction d -> d/r of each shortcut.
        aug_bias (`bool`, defaults to False): biases in the shortcut projections.
        aug_zero_init (`bool`, defaults to False): initialise each shortcut's output projection to zero, so a
            freshly built model computes exactly what it would without shortcuts.
    """

    model_type = "pangu_pi"
    keys_to_ignore_at_inference = ["past_key_values"]
    base_model_tp_plan = {
        "layers.*.self_attn.q_proj": "colwise",
        "layers.*.self_attn.k_proj": "colwise",
        "layers.*.self_attn.v_proj": "colwise",
        "layers.*.self_attn.o_proj": "rowwise",
        "layers.*.mlp.gate_proj": "colwise",
        "layers.*.mlp.up_proj": "colwise",
        "layers.*.mlp.down_proj": "rowwise",
    }
    base_model_pp_plan = {
        "embed_tokens": (["input_ids"], ["inputs_embeds"]),
        "layers": (["hidden_states", "attention_mask"], ["hidden_states"]),
        "norm": (["hidden_states"], ["hidden_states"]),
    }

    vocab_size: int = 100883
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 29
    num_attention_heads: int = 32
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 4096
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-6
    use_cache: bool = True
    pad_token_id: int | None = None
    bos_token_id: int | None = 1
    eos_token_id: int | list[int] | None = 2
    tie_word_embeddings: bool = False
    rope_parameters: dict | None = None
    attention_bias: bool = False
    attention_dropout: float = 0.0
    mlp_bias: bool = False

    siaf_terms: int = 2
    siaf_activations: list[str] | None = None
    siaf_scale_by_n: bool = False
    siaf_neighbor_kernel: int = 1
    aug_shortcuts: int = 1
    aug_reduction: int = 32
    aug_bias: bool = False
    aug_zero_init: bool = False

    def __post_init__(self, **kwargs):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None and self.num_attention_heads and self.hidden_size % self.num_attention_heads == 0:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.siaf_activations is None:
            self.siaf_activations = [self.hidden_act] * max(int(self.siaf_terms), 1)
        elif isinstance(self.siaf_activations, str):
            self.siaf_activations = [self.siaf_activations] * max(int(self.siaf_terms), 1)
        elif len(self.siaf_activations) == 1 and self.siaf_terms > 1:
            self.siaf_activations = list(self.siaf_activations) * self.siaf_terms
        else:
            self.siaf_activations = list(self.siaf_activations)
        super().__post_init__(**kwargs)
        self.check_pangu_pi_fields()

    def check_pangu_pi_fields(self):
        """Raise ValueError naming the first invalid field and its valid range."""

        def bad(field, value, valid):
            raise ValueError(f"PanguPiConfig.{field}={value!r} is invalid: {valid}.")

        for field in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
            value = getattr(self, field)
            if not isinstance(value, int) or value < 1:
                bad(field, value, "must be an integer >= 1")
        if self.hidden_size % self.num_attention_heads != 0:
            bad(
                "hidden_size", self.hidden_size,
                f"must be divisible by num_attention_heads={self.num_attention_heads}",
            )
        if not isinstance(self.num_key_value_heads, int) or not 1 <= self.num_key_value_heads:
            bad("num_key_value_heads", self.num_key_value_heads, "must be an integer >= 1")
        if self.num_attention_heads % self.num_key_value_heads != 0:
            bad(
                "num_key_value_heads", self.num_key_value_heads,
                f"must divide num_attention_heads={self.num_attention_heads} (grouped-query attention)",
            )
        if not isinstance(self.head_dim, int) or self.head_dim < 2 or self.head_dim % 2:
            bad("head_dim", self.head_dim, "must be an even integer >= 2 (rotary embeddings rotate pairs)")
        if self.hidden_act not in SIAF_ACTIVATIONS:
            bad("hidden_act", self.hidden_act, f"must be one of {', '.join(SIAF_ACTIVATIONS)}")
        if not isinstance(self.siaf_terms, int) or self.siaf_terms < 1:
            bad("siaf_terms", self.siaf_terms, "must be an integer >= 1 (1 = plain activation)")
        if len(self.siaf_activations) != self.siaf_terms:
            bad(
                "siaf_activations", self.siaf_activations,
                f"must give one name per term (siaf_terms={self.siaf_terms}) or a single name for all",
            )
        for name in self.siaf_activations:
            if name not in SIAF_ACTIVATIONS:
                bad("siaf_activations", name, f"each name must be one of {', '.join(SIAF_ACTIVATIONS)}")
        k = self.siaf_neighbor_kernel
        if not isinstance(k, int) or k < 1 or k % 2 == 0:
            bad("siaf_neighbor_kernel", k, "must be an odd integer >= 1 (1 = off, 3 = the documented opt-in)")
        if not isinstance(self.aug_shortcuts, int) or self.aug_shortcuts < 0:
            bad("aug_shortcuts", self.aug_shortcuts, "must be an integer >= 0 (0 = off)")
        r = self.aug_reduction
        if not isinstance(r, int) or not 1 <= r <= self.hidden_size:
            bad("aug_reduction", r, f"must be an integer in [1, hidden_size={self.hidden_size}]")
        if not 0.0 <= float(self.attention_dropout) < 1.0:
            bad("attention_dropout", self.attention_dropout, "must be in [0, 1)")
        if not self.rms_norm_eps > 0:
            bad("rms_norm_eps", self.rms_norm_eps, "must be > 0")

    @property
    def layer_types(self) -> list[str]:
        # The cache layer type per decoder layer: with the neighbour convolution on, each layer keeps a
        # convolution state beside its keys and values ("hybrid" in transformers' Cache classes).
        kind = "hybrid" if self.siaf_neighbor_kernel > 1 else "full_attention"
        return [kind] * self.num_hidden_layers

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "PanguPiConfig":
        """Build a config from a named preset (`pangu-pi-7b`, `pangu-pi-1b`, `tiny`) plus field overrides."""
        if name not in PANGU_PI_PRESETS:
            raise ValueError(f"unknown PanGu-π preset {name!r}; valid presets: {', '.join(PANGU_PI_PRESETS)}")
        return cls(**{**PANGU_PI_PRESETS[name], **overrides})


__all__ = ["PanguPiConfig", "PANGU_PI_PRESETS", "SIAF_ACTIVATIONS"]
