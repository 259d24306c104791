//! `ringtrace stat`: a ring file's header, positions, counters and processes.

use std::fmt::Write as _;
use std::path::Path;

use ringtrace::inspect::{Header, RingMode, State};

use crate::format::{alive, json_string, pid_text, Failure};

pub fn run(path: &Path, json: bool) -> Result<(), Failure> {
    if let Some(k) = crate::kernel::parse(path)? {
        return crate::kernel::stat(&k, json);
    }
    if crate::channel::is_channel(path)? {
        return crate::channel::stat(path, json);
    }
    if crate::snapfile::is_snapshot_file(path) {
        return crate::snapfile::stat(path, json);
    }
    let ring = crate::channel::open_ring(path)?;
    let state = ring.state()?;
    let h = ring.header();
    let text = if json { to_json(path, h, &state) } else { to_text(path, h, &state) };
    crate::format::print(&text)
}

fn watermark(w: u64) -> String {
    match w {
        0 => "when the consumer has caught up".into(),
        u64::MAX => "forced wakeups only".into(),
        w if w == u64::MAX - 1 => "every half ring".into(),
        w => format!("watermark of {w} bytes"),
    }
}

fn clock(c: u32) -> String {
    if c == 0 {
        "0 (no timestamps)".into()
    } else {
        c.to_string()
    }
}

/// The producers' processes, each marked `(exited)` if it is gone, and how many are
/// alive.
fn pids(state: &State) -> (String, usize) {
    if state.producers.is_empty() {
        let pid = state.producer_attached;
        return (pid_text(pid), usize::from(pid != 0 && alive(pid)));
    }
    let live = state.producers.iter().filter(|p| alive(p.owner)).count();
    let text = state
        .producers
        .iter()
        .map(|p| {
            if alive(p.owner) {
                format!("{} (slot {})", p.owner, p.slot)
            } else {
                format!("{} (slot {}, exited)", p.owner, p.slot)
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    (text, live)
}

/// The retire lock's holder: its pid (without the pauser bit), and whether it pauses.
fn lock_holder(s: &State) -> String {
    let pid = s.lock_pid & !PAUSER;
    let what = if s.lock_pid & PAUSER != 0 { "paused by" } else { "retire lock held by" };
    format!("{what} pid {}", pid_text(pid))
}

/// Bit 31 of the retire lock word: its holder is pausing the ring.
const PAUSER: u32 = 1 << 31;

fn to_text(path: &Path, h: &Header, s: &State) -> String {
    let (lo, hi) = s.window(h.mode);
    let used = hi - lo;
    let mut t = String::new();
    let _ = writeln!(t, "ring file     {}", path.display());
    let _ = writeln!(t, "layout        version {}, created {} by pid {}", h.version, utc(h.created_ns), h.creator_pid);
    let _ = writeln!(t, "kind          {} ({}-producer)", h.kind, if h.kind.code() == 1 { "multi" } else { "single" });
    let _ = writeln!(t, "mode          {}", h.mode);
    let _ = writeln!(t, "capacity      {} bytes (data at offset {})", h.capacity, h.data_offset);
    let _ = writeln!(t, "wakeups       {}{}", watermark(h.watermark), if h.futex() { ", futex doorbell" } else { "" });
    let _ = writeln!(t, "clock         {}", clock(h.clock));
    let pct = used as f64 * 100.0 / h.capacity as f64;
    let held = if h.mode == RingMode::Overwrite { "held" } else { "unconsumed" };
    let _ = writeln!(t, "in the ring   {used} bytes {held} ({pct:.1}%), positions {lo}..{hi}");
    let _ = write!(t, "positions     producer {}", s.producer_pos);
    if s.paused {
        t.push_str(" (paused)");
    }
    let _ = write!(t, ", consumer {} (read {})", s.consumer_pos, s.consumer_read);
    if h.mode == RingMode::Overwrite {
        let _ = write!(t, ", overwrite {}, zeroed to {}", s.over_pos, s.zeroed);
        if s.retire_locked || s.lock_pid != 0 {
            let _ = write!(t, " ({})", lock_holder(s));
        }
    }
    t.push('\n');
    let _ = writeln!(
        t,
        "producers     committed {}, discarded {}, lost {} (paused {}), too large {}",
        s.committed, s.discarded, s.lost, s.refused_paused, s.too_large
    );
    let _ = write!(t, "consumer      consumed {}, skipped {}", s.consumed, s.skipped);
    if h.mode == RingMode::Overwrite {
        let _ = write!(t, ", overwritten unread {}; overwritten in all {}", s.overwritten_unread, s.overwritten);
    }
    let _ = writeln!(t, ", dead reservations {}", s.dead);
    let (producers, live) = pids(s);
    let gone = s.attached_producers() - live;
    let exited = if gone > 0 { format!(" ({gone} exited)") } else { String::new() };
    let _ = writeln!(
        t,
        "processes     consumer {}; {live} producer(s) attached{exited}: {producers}",
        pid_text(s.consumer_attached),
    );
    t
}

fn to_json(path: &Path, h: &Header, s: &State) -> String {
    let mut t = String::from("{\"path\":");
    json_string(&mut t, &path.display().to_string());
    let (lo, hi) = s.window(h.mode);
    let _ = write!(
        t,
        ",\"version\":{},\"kind\":\"{}\",\"mode\":\"{}\",\"creator_pid\":{},\"capacity\":{},\"data_offset\":{},\
         \"watermark\":{},\"flags\":{},\"clock\":{},\"created_ns\":{},\"window_start\":{lo},\"window_end\":{hi},\
         \"producer_pos\":{},\"paused\":{},\"consumer_pos\":{},\"consumer_read\":{},\"over_pos\":{},\"overwritten\":{},\
         \"zeroed\":{},\"retire_locked\":{},\"lock_pid\":{},\"committed\":{},\"discarded\":{},\"lost\":{},\
         \"lost_paused\":{},\"too_large\":{},\"consumed\":{},\"skipped\":{},\"overwritten_unread\":{},\"dead\":{},\
         \"consumer_attached\":{},\"consumer_alive\":{},\"producer_attached\":{},\"producer_alive\":{},\
         \"lock_pauser\":{},\"producers\":[",
        h.version,
        h.kind,
        h.mode,
        h.creator_pid,
        h.capacity,
        h.data_offset,
        h.watermark,
        h.flags,
        h.clock,
        h.created_ns,
        s.producer_pos,
        s.paused,
        s.consumer_pos,
        s.consumer_read,
        s.over_pos,
        s.overwritten,
        s.zeroed,
        s.retire_locked,
        s.lock_pid,
        s.committed,
        s.discarded,
        s.lost,
        s.refused_paused,
        s.too_large,
        s.consumed,
        s.skipped,
        s.overwritten_unread,
        s.dead,
        s.consumer_attached,
        s.consumer_attached != 0 && alive(s.consumer_attached),
        s.producer_attached,
        s.producer_attached != 0 && alive(s.producer_attached),
        s.lock_pid & PAUSER != 0,
    );
    for (i, p) in s.producers.iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        let _ = write!(
            t,
            "{sep}{{\"slot\":{},\"pid\":{},\"alive\":{},\"committed\":{}}}",
            p.slot,
            p.owner,
            alive(p.owner),
            p.committed
        );
    }
    t.push_str("]}\n");
    t
}

/// `2024-05-01 12:34:56 UTC` for nanoseconds since the Unix epoch.
pub fn utc(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days, for days since 1970-01-01 (non-negative).
    let z = days as i64 + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn utc() {
        assert_eq!(super::utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc(1_700_000_000_000_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(super::utc(951_782_400 * 1_000_000_000), "2000-02-29 00:00:00 UTC");
        let _ = super::utc(u64::MAX);
    }
}
