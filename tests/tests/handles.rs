//! Function handles of the older runtime generation (the `Kernel*` itself, before the
//! 2026 `rtInnerObject` wrapper) name kernels registered before the agent attached. A binary
//! of its own: its attach session must not overlap the other live tests' probe churn.
use tests::attach::attach_and_name_kernels;

#[test]
fn attach_names_kernels_from_2025_runtime_handles() {
    attach_and_name_kernels("2025");
}
