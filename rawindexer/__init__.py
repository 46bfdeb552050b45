"""rawindexer: fp8_mqa_logits (the DeepSeek-V3.2 / GLM-5 lightning indexer) as a hand-written gfx950
kernel, launched through hip-python (ROCm), a CUDA sm_90a twin (cuda-bindings), or the project's own
gfx950 emulator on the CPU; arrays cross zero-copy through DLPack. No torch at build or import time."""
from .api import Indexer, fp8_mqa_logits, is_supported, launch
from .errors import KernelNotBuiltError, RawindexerError, ValidationError
from .paged import (PagedIndexer, fp8_paged_mqa_logits, is_paged_supported, launch_paged,
                    prepare_paged_mqa_logits)

__all__ = ["Indexer", "fp8_mqa_logits", "is_supported", "launch", "PagedIndexer", "fp8_paged_mqa_logits",
           "is_paged_supported", "launch_paged", "prepare_paged_mqa_logits", "RawindexerError", "ValidationError",
           "KernelNotBuiltError"]
__version__ = "0.1.0"
