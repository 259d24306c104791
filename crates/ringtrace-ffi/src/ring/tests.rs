use super::*;

/// `ringtrace_stats` is `ringtrace::Stats` field for field: the same names in the
/// same order, each copied from its namesake.
#[test]
fn stats_mirror_the_library_field_for_field() {
    let mut s = Stats::default();
    // Distinct values, none zero: a field copied from another, or left out, shows.
    (s.committed, s.discarded, s.lost, s.refused_paused, s.overwritten) = (1, 2, 3, 4, 5);
    (s.overwritten_unread, s.dead, s.overwrite_pos, s.too_large, s.consumed) = (6, 7, 8, 9, 10);
    (s.skipped, s.consumer_pos, s.producer_pos, s.available, s.capacity) = (11, 12, 13, 14, 15);
    let c = ringtrace_stats::from(s);
    assert_eq!(format!("{c:?}"), format!("{s:?}").replacen("Stats", "ringtrace_stats", 1));
    assert!(!format!("{s:?}").contains(": 0"), "a field of Stats is not set here: {s:?}");
}
