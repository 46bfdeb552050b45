"""What checks a kernel: references, gates, input generators. For the package's tests, its benchmarks and
users' own tests; nothing in the launch path imports it.

    reference        fp8_mqa_logits_ref: the numpy reference (exact products, f64 sums), chunked over rows
    grading          grade / poison / calc_diff: the gates every prefill result passes (NaN-poisoned output)
    windows          the window modes (causal, context-parallel, misaligned, empty, past-end, multi-request)
    torch_reference  torch_fp8_mqa_logits / make_inputs: the plain-torch reference (needs torch; import it
                     explicitly)
    paged_reference  fp8_paged_mqa_logits_ref and the fused-cache layout helpers
    paged_cases      random paged-decode cases (block tables, context lengths)
    paged_grading    grade_paged: the gates of a paged-decode result
"""
from .grading import DIFF_TOLERANCE, Grade, calc_diff, grade, poison
from .paged_grading import grade_paged
from .paged_reference import fp8_paged_mqa_logits_ref
from .reference import fp8_mqa_logits_ref
from .windows import WINDOW_MODES, WindowNotApplicable, make_windows

__all__ = ["DIFF_TOLERANCE", "Grade", "calc_diff", "grade", "poison", "grade_paged", "fp8_paged_mqa_logits_ref",
           "fp8_mqa_logits_ref", "WINDOW_MODES", "WindowNotApplicable", "make_windows"]
