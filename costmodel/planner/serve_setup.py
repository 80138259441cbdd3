"""What a serving plan is asked: the batch, context and chips of decode, and the prompt of prefill."""

from __future__ import annotations

from dataclasses import dataclass

from ...base.errors import InputError


@dataclass(frozen=True)
class ServeSetup:
    """Decode `batch` sequences of `context` tokens on `chips` chips; prefill `prefill_tokens`."""

    batch: int
    context: int
    chips: int
    param_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    compute_dtype: str = "bf16"
    prefill_tokens: int = 0
    mfu: float = 0.4

    def __post_init__(self) -> None:
        if self.batch <= 0 or self.context <= 0 or self.chips <= 0 or self.prefill_tokens < 0:
            raise InputError("batch, context and chips must be positive")
        if not 0 < self.mfu <= 1:
            raise InputError(f"MFU must be in (0, 1], got {self.mfu}")
