//! Kernel rings: read a BPF ring buffer map that a BPF program fills, or, with no
//! argument, the perf event ring of a software event (no BPF program needed).
//!
//! Run: `cargo run --release -p ringtrace --example kernel_ring [-- MAP [SECONDS]]`
//!
//! MAP is a `BPF_MAP_TYPE_RINGBUF` map: the path it is pinned at in a bpffs, or its id.
//! Find one with `bpftool map list` (the `ringbuf` lines; their first number is the
//! id), and pin it with `bpftool map pin id ID /sys/fs/bpf/NAME`. Needs root, or
//! CAP_BPF (pinned path) / CAP_SYS_ADMIN (id).

use std::time::{Duration, Instant};

use ringtrace::kernel::bpf::BpfRingBuf;
use ringtrace::kernel::perf::{ForwardRing, PerfEvent, Sample, Software, SAMPLE_TID, SAMPLE_TIME};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first() {
        Some(map) => {
            let seconds = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(5);
            bpf_map(map, Duration::from_secs(seconds))
        }
        None => {
            println!("usage: kernel_ring MAP [SECONDS]   (MAP: a pinned path or a map id; see `bpftool map list`)");
            println!("no MAP given: reading a perf event ring instead");
            perf_ring()
        }
    }
}

/// Consumes a BPF ring buffer map for `duration`, printing the first records.
fn bpf_map(map: &str, duration: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let mut ring = match map.parse::<u32>() {
        Ok(id) => BpfRingBuf::open_id(id)?,
        Err(_) => BpfRingBuf::open_pinned(map)?,
    };
    let name = if ring.name().is_empty() { "(no name)" } else { ring.name() };
    println!("map {name} (id {}): {} bytes", ring.map_id(), ring.capacity());
    let deadline = Instant::now() + duration;
    let mut n = 0u64;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        // Sleeps until the kernel commits a record (or the time is up); the records
        // are read in place, in the order the BPF program reserved them.
        ring.poll(Some(left), |rec: &[u8]| {
            if n < 5 {
                println!("record of {} bytes: {:02x?}", rec.len(), &rec[..rec.len().min(16)]);
            }
            n += 1;
        })?;
    }
    println!("{n} records in {duration:?}");
    Ok(())
}

/// Samples this thread's CPU time every 100 µs into a perf ring, then reads it.
fn perf_ring() -> Result<(), Box<dyn std::error::Error>> {
    let event = match PerfEvent::software(Software::TaskClock)
        .sample_period(100_000) // one sample per 100 µs of CPU time
        .sample_type(SAMPLE_TID | SAMPLE_TIME)
        .open()
    {
        Ok(event) => event,
        Err(e) => {
            // Without root or CAP_PERFMON, perf_event_paranoid may forbid it.
            println!("skipped: {e}");
            return Ok(());
        }
    };
    let mut ring = ForwardRing::new(&event, 8)?; // 8 data pages
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(5) {
        std::hint::spin_loop(); // use CPU time, so that the kernel writes samples
    }
    let mut samples = 0;
    ring.read(|rec| {
        if let Some(s) = Sample::parse(&rec, event.sample_type()) {
            if samples == 0 {
                println!("first sample: pid {:?} tid {:?} time {:?} ns", s.pid, s.tid, s.time);
            }
            samples += 1;
        }
    })?;
    println!("{samples} samples read, {} lost", ring.lost());
    Ok(())
}
