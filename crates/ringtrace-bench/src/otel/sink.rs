//! The OTLP sink the `otel` rows export to when no collector is given: a child process
//! (this program run again, `__otlp-sink`) serving OTLP/HTTP on a loopback port, which
//! walks each request's protobuf wire format down to its spans and counts them (see
//! the parent module's documentation).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// The OTLP sink: a child process, this program run again (see the module comment).
pub(super) struct Sink {
    /// `None` once reaped.
    child: Option<Child>,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pub(super) endpoint: String,
}

impl Sink {
    pub(super) fn start() -> Result<Sink, String> {
        let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
        let mut child = Command::new(exe)
            .arg("__otlp-sink")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting the OTLP sink: {e}"))?;
        let (stdin, stdout) = (child.stdin.take().expect("piped"), child.stdout.take().expect("piped"));
        let mut sink = Sink { child: Some(child), stdin, stdout: BufReader::new(stdout), endpoint: String::new() };
        let port = sink.line()?;
        sink.endpoint = format!("http://127.0.0.1:{port}/v1/traces");
        Ok(sink)
    }

    fn line(&mut self) -> Result<String, String> {
        let mut l = String::new();
        match self.stdout.read_line(&mut l) {
            Ok(0) => Err("the OTLP sink exited".into()),
            Ok(_) => Ok(l.trim().to_owned()),
            Err(e) => Err(format!("reading the OTLP sink: {e}")),
        }
    }

    /// Spans the sink counted so far.
    pub(super) fn spans(&mut self) -> Result<u64, String> {
        writeln!(self.stdin, "count").and_then(|()| self.stdin.flush()).map_err(|e| format!("the OTLP sink: {e}"))?;
        self.line()?.parse().map_err(|e| format!("the OTLP sink's count: {e}"))
    }

    /// Stops the sink: the spans it counted and the CPU time (user and system) it spent.
    // The child is reaped by `wait4`, which gives its resource usage; `Child::wait` cannot.
    #[allow(clippy::zombie_processes)]
    pub(super) fn finish(mut self) -> Result<(u64, Duration), String> {
        let spans = self.spans()?;
        let _ = writeln!(self.stdin, "exit").and_then(|()| self.stdin.flush());
        let child = self.child.take().expect("not reaped yet");
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: all-zero bytes are a valid `rusage` (integers and `timeval`s).
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our child, not yet waited for (`Child` waits only when asked),
        // and both pointers are to live locals of the right types.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r != pid {
            return Err(format!("wait4 on the OTLP sink: {}", io::Error::last_os_error()));
        }
        let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
        Ok((spans, tv(usage.ru_utime) + tv(usage.ru_stime)))
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // Not finished (an error on the way): end the sink.
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The sink's main (`ringtrace-bench __otlp-sink`): prints the port it listens on,
/// serves OTLP/HTTP export requests, answers each line `count` on its standard input
/// with the spans counted so far, and exits at `exit` or when its input closes.
pub fn sink_main() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let spans = Arc::new(AtomicU64::new(0));
    {
        let mut out = io::stdout().lock();
        writeln!(out, "{}", listener.local_addr()?.port())?;
        out.flush()?;
    }
    let s2 = spans.clone();
    std::thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            match line.as_deref().map(str::trim) {
                Ok("count") => {
                    let mut out = io::stdout().lock();
                    let _ = writeln!(out, "{}", s2.load(Relaxed));
                    let _ = out.flush();
                }
                Ok(_) | Err(_) => break,
            }
        }
        std::process::exit(0);
    });
    for conn in listener.incoming() {
        let conn = conn?;
        let spans = spans.clone();
        std::thread::spawn(move || {
            if let Err(e) = serve(conn, &spans) {
                eprintln!("ringtrace-bench: OTLP sink: {e}");
            }
        });
    }
    Ok(())
}

/// A protobuf varint at the start of `buf`, and the rest.
pub(super) fn varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, &buf[i + 1..]));
        }
    }
    None
}

/// Walks the fields of the protobuf message `buf`, calling `f(field, payload)` for each
/// length-delimited one; `None` if `buf` is not a well-formed message or `f` says so.
pub(super) fn fields(mut buf: &[u8], mut f: impl FnMut(u64, &[u8]) -> Option<()>) -> Option<()> {
    while !buf.is_empty() {
        let (tag, rest) = varint(buf)?;
        let field = tag >> 3;
        buf = match tag & 7 {
            0 => varint(rest)?.1,
            1 => rest.get(8..)?,
            2 => {
                let (len, rest) = varint(rest)?;
                let len = usize::try_from(len).ok()?;
                f(field, rest.get(..len)?)?;
                &rest[len..]
            }
            5 => rest.get(4..)?,
            _ => return None,
        };
        if field == 0 {
            return None;
        }
    }
    Some(())
}

/// Spans in an OTLP/protobuf `ExportTraceServiceRequest`, if `body` is one: the wire
/// format walked down to each span's fields (`resource_spans` = 1, its `scope_spans` =
/// 2, their `spans` = 2, per `opentelemetry/proto/collector/trace/v1` and
/// `trace/v1/trace.proto`), nothing decoded into values, so that the sink spends little
/// CPU on a machine it shares with the bench.
pub(super) fn count_spans(body: &[u8]) -> Option<u64> {
    let mut n = 0u64;
    fields(body, |f, resource_spans| {
        if f != 1 {
            return Some(());
        }
        fields(resource_spans, |f, scope_spans| {
            if f != 2 {
                return Some(());
            }
            fields(scope_spans, |f, span| {
                if f == 2 {
                    n += 1;
                    fields(span, |_, _| Some(()))?;
                }
                Some(())
            })
        })
    })?;
    Some(n)
}

/// One HTTP/1.1 connection: requests with a `Content-Length` body, one after another.
/// Each answer goes out in one write, with Nagle's algorithm off: an answer written in
/// pieces waits for the client's delayed ACK (40 ms on Linux) before its last piece,
/// which would hold each export up that long.
pub(super) fn serve(conn: TcpStream, spans: &AtomicU64) -> io::Result<()> {
    conn.set_nodelay(true)?;
    let mut reader = BufReader::with_capacity(1 << 16, conn.try_clone()?);
    let mut writer = conn;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let post = line.starts_with("POST ");
        let (mut len, mut chunked) = (None, false);
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let h = line.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse::<usize>().ok();
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = true;
                }
            }
        }
        if chunked || len.is_none() {
            // Not a body this sink reads: answer and close.
            writer.write_all(b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")?;
            return Ok(());
        }
        let mut body = vec![0u8; len.unwrap_or(0)];
        reader.read_exact(&mut body)?;
        let status = match count_spans(&body).filter(|_| post) {
            Some(n) => {
                spans.fetch_add(n, Relaxed);
                "200 OK"
            }
            None => "400 Bad Request",
        };
        let answer = format!("HTTP/1.1 {status}\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n");
        writer.write_all(answer.as_bytes())?;
    }
}
