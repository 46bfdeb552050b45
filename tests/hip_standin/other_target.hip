// A tiny kernel the hip stand-in tests build for gfx942 (not the device's gfx950): loading it must fail
// with hipErrorNoBinaryForGpu, as the ROCm runtime does for a code object of another target.
extern "C" __attribute__((global)) void scale_by_two(float *x, int n) {
    int i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
    if (i < n) x[i] *= 2.0f;
}
