"""Token-weighted mixing, importable beside packing: it lives in `streaming.plan.mixing_tokens`."""

from streaming.plan.mixing_tokens import (
    measured_token_shares,
    realised_token_shares,
    token_mix_counts,
)

__all__ = ["measured_token_shares", "realised_token_shares", "token_mix_counts"]
