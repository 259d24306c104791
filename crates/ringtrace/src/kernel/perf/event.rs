//! Opening software perf events (`perf_event_open(2)`) and their ioctls. One of the two
//! files of this module with `unsafe` code (the other is `map.rs`): the system call and
//! the ioctls, each on a file descriptor this module owns or borrows.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use perf_event_open_sys as pe;
use perf_event_open_sys::bindings as sys;

use super::sample::{SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME};
use crate::error::KernelError;

/// A software event: counted by the kernel itself, so it works without hardware counters
/// (in virtual machines too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Software {
    /// `PERF_COUNT_SW_CPU_CLOCK`: a high-resolution timer, in nanoseconds of wall time
    /// while the event is scheduled in.
    CpuClock,
    /// `PERF_COUNT_SW_TASK_CLOCK`: nanoseconds of CPU time of the measured task.
    TaskClock,
    /// `PERF_COUNT_SW_PAGE_FAULTS`: page faults.
    PageFaults,
    /// `PERF_COUNT_SW_CONTEXT_SWITCHES`: context switches (they happen in the kernel:
    /// count them with [`exclude_kernel(false)`](EventBuilder::exclude_kernel)).
    ContextSwitches,
    /// `PERF_COUNT_SW_CPU_MIGRATIONS`: moves of the task to another CPU (in the kernel, as
    /// context switches).
    CpuMigrations,
    /// `PERF_COUNT_SW_DUMMY`: counts nothing; carries side-band records (mmap, comm, ...).
    Dummy,
}

impl Software {
    fn config(self) -> u64 {
        (match self {
            Software::CpuClock => sys::PERF_COUNT_SW_CPU_CLOCK,
            Software::TaskClock => sys::PERF_COUNT_SW_TASK_CLOCK,
            Software::PageFaults => sys::PERF_COUNT_SW_PAGE_FAULTS,
            Software::ContextSwitches => sys::PERF_COUNT_SW_CONTEXT_SWITCHES,
            Software::CpuMigrations => sys::PERF_COUNT_SW_CPU_MIGRATIONS,
            Software::Dummy => sys::PERF_COUNT_SW_DUMMY,
        }) as u64
    }

    fn name(self) -> &'static str {
        match self {
            Software::CpuClock => "cpu-clock",
            Software::TaskClock => "task-clock",
            Software::PageFaults => "page-faults",
            Software::ContextSwitches => "context-switches",
            Software::CpuMigrations => "cpu-migrations",
            Software::Dummy => "dummy",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Rate {
    Period(u64),
    Freq(u64),
}

/// Attributes of a software event to open; made by [`PerfEvent::software`].
#[derive(Clone, Debug)]
#[must_use = "an EventBuilder does nothing until open() is called"]
pub struct EventBuilder {
    kind: Software,
    rate: Rate,
    sample_type: u64,
    pid: i32,
    cpu: i32,
    wakeup_events: u32,
    backward: bool,
    disabled: bool,
    exclude_kernel: bool,
    clockid: Option<i32>,
}

impl EventBuilder {
    /// One sample every `period` events (for the clocks: every `period` nanoseconds; the
    /// kernel runs its timer at most every 10 µs). The default is 0: the event only
    /// counts and writes no samples.
    pub fn sample_period(mut self, period: u64) -> Self {
        self.rate = Rate::Period(period);
        self
    }

    /// About `hz` samples per second instead of a fixed period (at most
    /// `kernel.perf_event_max_sample_rate`).
    pub fn sample_freq(mut self, hz: u64) -> Self {
        self.rate = Rate::Freq(hz);
        self
    }

    /// What each sample holds: an OR of `SAMPLE_*` bits ([`SAMPLE_IP`],
    /// ...). The default is `SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME`.
    pub fn sample_type(mut self, bits: u64) -> Self {
        self.sample_type = bits;
        self
    }

    /// The task to measure: 0 (the default) is the thread that calls
    /// [`open`](Self::open), a positive id that thread or process, -1 every task on
    /// [`cpu`](Self::cpu).
    pub fn pid(mut self, pid: i32) -> Self {
        self.pid = pid;
        self
    }

    /// The CPU to measure on: -1 (the default) for whichever CPU the task runs on.
    pub fn cpu(mut self, cpu: i32) -> Self {
        self.cpu = cpu;
        self
    }

    /// Wake pollers ([`ForwardRing::wait`](super::ForwardRing::wait)) every `n` samples.
    /// The default, 0, wakes them when the ring is half full.
    pub fn wakeup_events(mut self, n: u32) -> Self {
        self.wakeup_events = n;
        self
    }

    /// `write_backward`: the kernel writes records from the end of the ring toward its
    /// start, so that `data_head` is always the start of the newest record. Required for
    /// a [`BackwardRing`](super::BackwardRing) (a flight recorder); a
    /// [`ForwardRing`](super::ForwardRing) needs it off (the default).
    pub fn backward(mut self, backward: bool) -> Self {
        self.backward = backward;
        self
    }

    /// Open the event disabled, to start it later with [`PerfEvent::enable`]. The
    /// default is false: it counts from `open`.
    pub fn disabled(mut self, disabled: bool) -> Self {
        self.disabled = disabled;
        self
    }

    /// Leave out events in kernel mode (and the hypervisor). The default is true, which is
    /// what `kernel.perf_event_paranoid` = 2 (the kernel's default) allows a process
    /// without `CAP_PERFMON`; context switches and migrations happen in kernel mode, so
    /// they need false.
    pub fn exclude_kernel(mut self, exclude: bool) -> Self {
        self.exclude_kernel = exclude;
        self
    }

    /// Timestamp samples with this clock (`use_clockid`), e.g. `libc::CLOCK_MONOTONIC`,
    /// which is the same on every CPU and comparable with `clock_gettime`. The default is
    /// the kernel's `perf_clock` (per-CPU `local_clock`).
    pub fn clockid(mut self, clockid: i32) -> Self {
        self.clockid = Some(clockid);
        self
    }

    /// Opens the event (`perf_event_open(2)`, close-on-exec).
    pub fn open(self) -> Result<PerfEvent, KernelError> {
        let mut attr = sys::perf_event_attr { type_: sys::PERF_TYPE_SOFTWARE, ..Default::default() };
        attr.size = std::mem::size_of::<sys::perf_event_attr>() as u32;
        attr.config = self.kind.config();
        match self.rate {
            Rate::Period(p) => attr.__bindgen_anon_1.sample_period = p,
            Rate::Freq(hz) => {
                attr.__bindgen_anon_1.sample_freq = hz;
                attr.set_freq(1);
            }
        }
        attr.sample_type = self.sample_type;
        attr.__bindgen_anon_2.wakeup_events = self.wakeup_events;
        attr.set_disabled(self.disabled as u64);
        attr.set_exclude_kernel(self.exclude_kernel as u64);
        attr.set_exclude_hv(self.exclude_kernel as u64);
        attr.set_write_backward(self.backward as u64);
        if let Some(c) = self.clockid {
            attr.set_use_clockid(1);
            attr.clockid = c;
        }
        // SAFETY: `attr` is a valid, initialized `perf_event_attr` whose `size` is its own
        // size; the kernel only reads it (and may write `size` back on E2BIG), and it
        // outlives the call. No group fd (-1).
        let fd = unsafe {
            pe::perf_event_open(&mut attr, self.pid, self.cpu, -1, sys::PERF_FLAG_FD_CLOEXEC as libc::c_ulong)
        };
        if fd < 0 {
            let source = io::Error::last_os_error();
            let hint = open_hint(&source, self.pid, self.exclude_kernel);
            return Err(KernelError::Open { event: self.kind.name(), source, hint });
        }
        // SAFETY: `fd` is a new file descriptor returned by perf_event_open that nothing
        // else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(PerfEvent { fd, sample_type: self.sample_type, backward: self.backward })
    }
}

/// What to do about a failed `perf_event_open`.
fn open_hint(e: &io::Error, pid: i32, exclude_kernel: bool) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            let paranoid = super::record::sysctl("/proc/sys/kernel/perf_event_paranoid");
            format!(
                "not permitted: /proc/sys/kernel/perf_event_paranoid is {paranoid}; without CAP_PERFMON \
                 (or CAP_SYS_ADMIN) a process may measure its own threads only at 2 or less, and kernel mode \
                 only at 1 or less{}; lower it (sysctl kernel.perf_event_paranoid=2) or grant CAP_PERFMON \
                 (a container's seccomp profile may also forbid perf_event_open)",
                if exclude_kernel { "" } else { " (this event counts kernel mode: exclude_kernel(false))" }
            )
        }
        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) => {
            "event not supported by this kernel or machine (or the sample_type asks for something it \
             cannot sample)"
                .into()
        }
        Some(libc::ENODEV) => "event not supported on this CPU".into(),
        Some(libc::EINVAL) => "the kernel rejected the attributes: check the sample_type bits, that \
                               sample_freq is at most kernel.perf_event_max_sample_rate, the clockid, and that \
                               pid and cpu are not both -1"
            .into(),
        Some(libc::ESRCH) => format!("no task with id {pid}"),
        Some(libc::EMFILE) | Some(libc::ENFILE) => "too many open files: close some or raise RLIMIT_NOFILE".into(),
        Some(libc::ENOSYS) => "perf_event_open is not available: kernel without CONFIG_PERF_EVENTS".into(),
        _ => "see perf_event_open(2)".into(),
    }
}

/// An open perf event: a counter whose samples the kernel writes into a ring once the
/// event is mapped ([`ForwardRing`](super::ForwardRing), [`BackwardRing`](super::BackwardRing)).
/// Closed on drop (a mapped ring keeps the kernel's event alive until it is unmapped).
#[derive(Debug)]
pub struct PerfEvent {
    fd: OwnedFd,
    sample_type: u64,
    backward: bool,
}

impl PerfEvent {
    /// A builder for a software event of `kind`; see [`EventBuilder`] for the defaults.
    pub fn software(kind: Software) -> EventBuilder {
        EventBuilder {
            kind,
            rate: Rate::Period(0),
            sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME,
            pid: 0,
            cpu: -1,
            wakeup_events: 0,
            backward: false,
            disabled: false,
            exclude_kernel: true,
            clockid: None,
        }
    }

    /// Starts counting and sampling (`PERF_EVENT_IOC_ENABLE`).
    pub fn enable(&self) -> Result<(), KernelError> {
        int_ioctl(self.fd.as_fd(), pe::ioctls::ENABLE, 0, "PERF_EVENT_IOC_ENABLE")
    }

    /// Stops counting and sampling (`PERF_EVENT_IOC_DISABLE`).
    pub fn disable(&self) -> Result<(), KernelError> {
        int_ioctl(self.fd.as_fd(), pe::ioctls::DISABLE, 0, "PERF_EVENT_IOC_DISABLE")
    }

    /// The `sample_type` it was opened with, for [`Sample::parse`](super::Sample::parse).
    pub fn sample_type(&self) -> u64 {
        self.sample_type
    }

    /// Whether it was opened with [`backward(true)`](EventBuilder::backward).
    pub fn is_backward(&self) -> bool {
        self.backward
    }
}

impl AsFd for PerfEvent {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// One of perf-event-open-sys's integer-argument perf ioctls on `fd`.
fn int_ioctl(
    fd: BorrowedFd<'_>,
    ioctl: unsafe fn(libc::c_int, libc::c_uint) -> libc::c_int,
    arg: libc::c_uint,
    op: &'static str,
) -> Result<(), KernelError> {
    // SAFETY: an ioctl that takes an integer argument, on a borrowed, open file
    // descriptor; on one that is not a perf event's, the kernel refuses it (ENOTTY).
    if unsafe { ioctl(fd.as_raw_fd(), arg) } < 0 {
        Err(KernelError::Ioctl { op, source: io::Error::last_os_error() })
    } else {
        Ok(())
    }
}

/// `PERF_EVENT_IOC_PAUSE_OUTPUT`: while paused, the kernel writes nothing into the event's
/// ring (it counts what it drops as lost).
pub(super) fn pause_output(fd: BorrowedFd<'_>, paused: bool) -> Result<(), KernelError> {
    let op = if paused { "PERF_EVENT_IOC_PAUSE_OUTPUT(1)" } else { "PERF_EVENT_IOC_PAUSE_OUTPUT(0)" };
    int_ioctl(fd, pe::ioctls::PAUSE_OUTPUT, paused as libc::c_uint, op)
}
