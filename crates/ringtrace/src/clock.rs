//! Record timestamps: the clock is a type parameter of a [`Channel`](crate::Channel),
//! part of its static configuration, so a write reads it with no branch on which one.
//!
//! Every clock gives nanoseconds in `CLOCK_MONOTONIC`'s time base, so records stamped
//! by different clocks, threads and processes compare directly:
//!
//! * [`Tsc`]: the CPU's time-stamp counter, one `rdtsc` (cheaper than the vDSO's
//!   `clock_gettime`, which reads it too and converts it), converted with a multiply and
//!   a shift. Only where the CPU says its TSC is invariant (constant rate, running in
//!   every sleep state: CPUID leaf `0x8000_0007`, EDX bit 8), x86-64 only. Calibrated
//!   once against `CLOCK_MONOTONIC` ([`Tsc::calibrate`], about 20 ms); within one
//!   calibration, the order of timestamps is the order of the TSC reads, exactly.
//!   The conversion drifts from `CLOCK_MONOTONIC` by the calibration's error (about a
//!   part per million): timestamps from two calibrations (two processes that each
//!   calibrated) may misorder events closer than that drift. A shared channel stores
//!   its creator's calibration, and every process that attaches uses it.
//! * [`Monotonic`]: `clock_gettime(CLOCK_MONOTONIC)` through the vDSO.
//! * [`BestClock`]: [`Tsc`] where it is invariant, [`Monotonic`] elsewhere (one
//!   well-predicted branch per read).
//! * [`NoClock`]: records carry no timestamp (8 bytes less per record); a channel
//!   reader then interleaves producers in no particular order.

#![cfg(not(loom))]

use std::fmt;
use std::time::Duration;

use crate::error::Error;

mod sealed {
    pub trait Sealed {}
}

/// A source of record timestamps. Sealed: [`Tsc`], [`Monotonic`], [`BestClock`],
/// [`NoClock`].
pub trait Clock: sealed::Sealed + Copy + fmt::Debug + Send + Sync + 'static {
    /// Whether records carry a timestamp (false only for [`NoClock`]).
    const STAMPED: bool;
    /// The clock's name in reports: `"tsc"`, `"mono"`, `"best"` or `"none"`.
    const NAME: &'static str;
    /// Its code in a channel file's header ([`crate::format::channel::clock_code`]).
    #[doc(hidden)]
    const CODE: u32;
    /// Nanoseconds in `CLOCK_MONOTONIC`'s time base (0 for [`NoClock`]).
    #[inline(always)]
    fn now(&self) -> u64 {
        self.raw_to_ns(self.raw())
    }
    /// The cheapest reading that orders like [`now`](Clock::now): TSC ticks for [`Tsc`]
    /// (and [`BestClock`] on the TSC), nanoseconds for the others. Channel records carry
    /// it, so a writer does not pay the conversion; readers convert.
    fn raw(&self) -> u64;
    /// Nanoseconds of a [`raw`](Clock::raw) reading.
    fn raw_to_ns(&self, raw: u64) -> u64;
    /// The calibration a shared channel stores so that other processes read the same
    /// time base (`[tsc0, ns0, mult]`; zeros for clocks without one).
    #[doc(hidden)]
    fn calibration(&self) -> [u64; 3] {
        [0; 3]
    }
    /// The clock a process attaching to a shared channel uses, made from the creator's
    /// [`calibration`](Clock::calibration); `None` if it cannot be used here.
    #[doc(hidden)]
    fn from_calibration(c: [u64; 3]) -> Option<Self>;
}

/// `CLOCK_MONOTONIC` now, in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    // `tv_sec` and `tv_nsec` of CLOCK_MONOTONIC are never negative.
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// `clock_gettime(CLOCK_MONOTONIC)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Monotonic;

impl sealed::Sealed for Monotonic {}
impl Clock for Monotonic {
    const STAMPED: bool = true;
    const NAME: &'static str = "mono";
    const CODE: u32 = crate::format::channel::clock_code::MONOTONIC;
    #[inline(always)]
    fn raw(&self) -> u64 {
        monotonic_ns()
    }
    #[inline(always)]
    fn raw_to_ns(&self, raw: u64) -> u64 {
        raw
    }
    fn from_calibration(_: [u64; 3]) -> Option<Self> {
        Some(Monotonic)
    }
}

/// No timestamps.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoClock;

impl sealed::Sealed for NoClock {}
impl Clock for NoClock {
    const STAMPED: bool = false;
    const NAME: &'static str = "none";
    const CODE: u32 = crate::format::channel::clock_code::NONE;
    #[inline(always)]
    fn raw(&self) -> u64 {
        0
    }
    #[inline(always)]
    fn raw_to_ns(&self, _: u64) -> u64 {
        0
    }
    fn from_calibration(_: [u64; 3]) -> Option<Self> {
        Some(NoClock)
    }
}

/// The invariant TSC, calibrated to `CLOCK_MONOTONIC` nanoseconds:
/// `ns = ns0 + ((tsc - tsc0) * mult) >> 32`.
#[derive(Clone, Copy, Debug)]
pub struct Tsc {
    tsc0: u64,
    ns0: u64,
    /// Nanoseconds per tick, times 2^32.
    mult: u64,
}

/// Reads the TSC (no fence: a timestamp may be taken a few instructions early or
/// late, which orders nothing else anyway).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` has no preconditions on x86-64 (user-mode TSC reads are only
    // disabled by CR4.TSD, which Linux leaves clear unless a process asks with
    // `PR_SET_TSC`; then it raises SIGSEGV, no undefined behaviour).
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rdtsc() -> u64 {
    0
}

impl Tsc {
    /// Whether this CPU's TSC is invariant (x86-64, CPUID leaf `0x8000_0007` EDX bit 8).
    pub fn available() -> bool {
        // `__cpuid` is a safe function since Rust 1.94 (unsafe before, as the MSRV has it).
        #[cfg(target_arch = "x86_64")]
        #[allow(unused_unsafe)]
        {
            use core::arch::x86_64::__cpuid;
            // SAFETY: CPUID exists on every x86-64 CPU; leaf 0x8000_0000 gives the
            // highest extended leaf, checked before leaf 0x8000_0007 is asked for.
            let max = unsafe { __cpuid(0x8000_0000) }.eax;
            if max < 0x8000_0007 {
                return false;
            }
            // SAFETY: as above; the leaf is supported.
            let edx = unsafe { __cpuid(0x8000_0007) }.edx;
            edx & (1 << 8) != 0
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// Measures the TSC's rate against `CLOCK_MONOTONIC` over about 20 ms (the
    /// calibration's error is about the clock reads' jitter over that span: a part per
    /// million or so). Each end takes the tightest of several `clock_gettime` reads
    /// bracketed by TSC reads.
    pub fn calibrate() -> Result<Tsc, Error> {
        Self::calibrate_over(Duration::from_millis(20))
    }

    /// [`calibrate`](Self::calibrate) over `span`.
    pub fn calibrate_over(span: Duration) -> Result<Tsc, Error> {
        if !Self::available() {
            return Err(Error::NoInvariantTsc);
        }
        let (t0, n0) = anchor();
        std::thread::sleep(span);
        let (t1, n1) = anchor();
        let (dt, dn) = (t1.wrapping_sub(t0), n1.saturating_sub(n0));
        if dt == 0 || dn < span.as_nanos() as u64 / 2 {
            return Err(Error::TscCalibration(format!("{dt} ticks in {dn} ns")));
        }
        let mult = ((u128::from(dn) << 32) / u128::from(dt)) as u64;
        // Rates from 100 MHz to 20 GHz: anything else is not a TSC.
        if !((1u64 << 32) / 20..=(10u64 << 32)).contains(&mult) {
            return Err(Error::TscCalibration(format!("{dt} ticks in {dn} ns")));
        }
        Ok(Tsc { tsc0: t1, ns0: n1, mult })
    }

    /// The calibration made once per process (the first call calibrates).
    pub fn shared() -> Result<Tsc, Error> {
        // The outcome in a form that can be cloned (`Error` cannot): why the
        // calibration failed, or `None` for no invariant TSC.
        static CAL: std::sync::OnceLock<Result<Tsc, Option<String>>> = std::sync::OnceLock::new();
        let cal = CAL.get_or_init(|| {
            Tsc::calibrate().map_err(|e| match e {
                Error::TscCalibration(why) => Some(why),
                _ => None,
            })
        });
        cal.clone().map_err(|why| why.map_or(Error::NoInvariantTsc, Error::TscCalibration))
    }

    /// TSC ticks per second, as calibrated.
    pub fn frequency_hz(&self) -> f64 {
        1e9 * (1u64 << 32) as f64 / self.mult as f64
    }

    /// The timestamp of a raw TSC value.
    #[inline(always)]
    pub fn to_ns(&self, tsc: u64) -> u64 {
        let d = tsc.wrapping_sub(self.tsc0) as i64;
        // Reads from before the calibration's anchor (other processes' early reads)
        // convert backwards, saturating at 0.
        let scaled = (i128::from(d) * i128::from(self.mult)) >> 32;
        let scaled = i64::try_from(scaled).unwrap_or(if scaled < 0 { i64::MIN } else { i64::MAX });
        self.ns0.saturating_add_signed(scaled)
    }
}

/// A `(tsc, monotonic ns)` pair: of 16 reads, the one whose bracketing TSC reads were
/// closest (the `clock_gettime` least disturbed), with the TSC at its middle.
fn anchor() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..16 {
        let a = rdtsc();
        let n = monotonic_ns();
        let b = rdtsc();
        let width = b.wrapping_sub(a);
        if width < best.0 {
            best = (width, a + width / 2, n);
        }
    }
    (best.1, best.2)
}

impl sealed::Sealed for Tsc {}
impl Clock for Tsc {
    const STAMPED: bool = true;
    const NAME: &'static str = "tsc";
    const CODE: u32 = crate::format::channel::clock_code::TSC;
    #[inline(always)]
    fn raw(&self) -> u64 {
        rdtsc()
    }
    #[inline(always)]
    fn raw_to_ns(&self, raw: u64) -> u64 {
        self.to_ns(raw)
    }
    fn calibration(&self) -> [u64; 3] {
        [self.tsc0, self.ns0, self.mult]
    }
    fn from_calibration(c: [u64; 3]) -> Option<Self> {
        let [tsc0, ns0, mult] = c;
        (Tsc::available() && ((1u64 << 32) / 20..=(10u64 << 32)).contains(&mult)).then_some(Tsc { tsc0, ns0, mult })
    }
}

/// [`Tsc`] where it is invariant (calibrated once per process), [`Monotonic`] elsewhere.
#[derive(Clone, Copy, Debug)]
pub struct BestClock(Option<Tsc>);

impl BestClock {
    /// Picks the clock (calibrating the TSC on the process's first call).
    pub fn new() -> Self {
        BestClock(Tsc::shared().ok())
    }

    /// Whether the TSC was picked.
    pub fn is_tsc(&self) -> bool {
        self.0.is_some()
    }
}

impl Default for BestClock {
    fn default() -> Self {
        Self::new()
    }
}

impl sealed::Sealed for BestClock {}
impl Clock for BestClock {
    const STAMPED: bool = true;
    const NAME: &'static str = "best";
    const CODE: u32 = crate::format::channel::clock_code::BEST;
    #[inline(always)]
    fn raw(&self) -> u64 {
        match &self.0 {
            Some(_) => rdtsc(),
            None => monotonic_ns(),
        }
    }
    #[inline(always)]
    fn raw_to_ns(&self, raw: u64) -> u64 {
        match &self.0 {
            Some(t) => t.to_ns(raw),
            None => raw,
        }
    }
    fn calibration(&self) -> [u64; 3] {
        self.0.map_or([0; 3], |t| t.calibration())
    }
    fn from_calibration(c: [u64; 3]) -> Option<Self> {
        if c == [0; 3] {
            return Some(BestClock(None));
        }
        Tsc::from_calibration(c).map(|t| BestClock(Some(t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_back() {
        let mut last = Monotonic.now();
        for _ in 0..10_000 {
            let t = Monotonic.now();
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn the_tsc_tracks_the_monotonic_clock() {
        let Ok(tsc) = Tsc::calibrate() else {
            return ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, "no invariant TSC on this CPU");
        };
        assert!((0.1e9..20e9).contains(&tsc.frequency_hz()), "{} Hz", tsc.frequency_hz());
        let mut last = tsc.now();
        for _ in 0..100_000 {
            let t = tsc.now();
            assert!(t >= last, "TSC timestamps went back: {last} -> {t}");
            last = t;
        }
        // Over 50 ms the two clocks agree to well within a millisecond, and in absolute
        // terms too. Each comparison is of paired reads, so that a preemption between
        // the reads of the two clocks (this runs on busy 2-core machines) is not taken
        // for a difference of the clocks.
        let (before, b0) = tsc_offset(&tsc);
        std::thread::sleep(Duration::from_millis(50));
        let (after, b1) = tsc_offset(&tsc);
        let drift = after - before;
        assert!(
            drift.unsigned_abs() < 1_000_000 + (b0 + b1) / 2,
            "TSC and CLOCK_MONOTONIC differ by {drift} ns over 50 ms (reads bracketed within {b0} and {b1} ns)"
        );
        assert!(after.unsigned_abs() < 1_000_000 + b1 / 2, "TSC is {after} ns off CLOCK_MONOTONIC (bracket {b1} ns)");
    }

    /// The TSC's offset from `CLOCK_MONOTONIC` (ns) and the uncertainty of that offset:
    /// paired reads (monotonic, TSC, monotonic), each TSC read compared with the midpoint
    /// of the two monotonic reads around it, keeping the pair with the narrowest bracket
    /// (the one least disturbed by a preemption or an interrupt). Tries until a bracket
    /// of at most 2 µs or for 200 ms, whichever comes first; fails if no pair was closer
    /// than 100 µs.
    fn tsc_offset(tsc: &Tsc) -> (i64, u64) {
        let deadline = std::time::Instant::now() + Duration::from_millis(200);
        let mut best = (0i64, u64::MAX);
        while best.1 > 2_000 && std::time::Instant::now() < deadline {
            let m0 = monotonic_ns();
            let t = tsc.now();
            let m1 = monotonic_ns();
            let bracket = m1 - m0;
            if bracket < best.1 {
                best = (t as i64 - (m0 + bracket / 2) as i64, bracket);
            }
        }
        assert!(best.1 < 100_000, "no pair of CLOCK_MONOTONIC reads closer than {} ns in 200 ms", best.1);
        best
    }

    #[test]
    fn a_calibration_round_trips_and_bad_ones_are_refused() {
        match Tsc::shared() {
            Ok(tsc) => {
                let again = Tsc::from_calibration(tsc.calibration()).unwrap();
                assert_eq!(again.to_ns(12345678), tsc.to_ns(12345678));
                assert!(Tsc::from_calibration([1, 2, 0]).is_none(), "a zero rate");
                assert!(Tsc::from_calibration([1, 2, u64::MAX]).is_none(), "an absurd rate");
            }
            Err(e) => ringtrace_fixtures::skip(ringtrace_fixtures::Feature::Tsc, format!("the calibration part: {e}")),
        }
        assert!(BestClock::from_calibration([0; 3]).is_some_and(|c| !c.is_tsc()));
        // Reads before the anchor convert backwards, saturating at zero.
        let t = Tsc { tsc0: 1000, ns0: 10, mult: 1 << 32 };
        assert_eq!(t.to_ns(1005), 15);
        assert_eq!(t.to_ns(995), 5);
        assert_eq!(t.to_ns(0), 0);
    }
}
