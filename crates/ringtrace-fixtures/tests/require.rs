//! `RINGTRACE_REQUIRE` and the skip helper: a listed feature turns a skip into a
//! failure, an unlisted one skips, a misspelt list fails. One test, since it sets the
//! process's environment.

use std::panic::catch_unwind;

use ringtrace_fixtures::{required, skip, Feature, REQUIRE_VAR};

#[test]
fn listed_features_fail_unlisted_ones_skip_and_unknown_names_are_refused() {
    std::env::set_var(REQUIRE_VAR, " bpf, tsc ");
    assert!(required(Feature::Bpf) && required(Feature::Tsc) && !required(Feature::Perf));
    let failed = catch_unwind(|| skip(Feature::Tsc, "no invariant TSC on this CPU")).unwrap_err();
    let why = failed.downcast_ref::<String>().unwrap();
    assert!(why.contains("no invariant TSC on this CPU") && why.contains("RINGTRACE_REQUIRE lists tsc"), "{why}");
    skip(Feature::Perf, "perf_event_open: not permitted");

    std::env::set_var(REQUIRE_VAR, "bpf,tcs");
    let refused = catch_unwind(|| required(Feature::Perf)).unwrap_err();
    let why = refused.downcast_ref::<String>().unwrap();
    assert!(why.contains("unknown feature \"tcs\""), "{why}");

    for unset in ["", ","] {
        std::env::set_var(REQUIRE_VAR, unset);
        assert!(![Feature::Bpf, Feature::Perf, Feature::Tsc].into_iter().any(required), "{unset:?}");
    }
    std::env::remove_var(REQUIRE_VAR);
    assert!(!required(Feature::Bpf));
    skip(Feature::Bpf, "BPF unavailable");
}
