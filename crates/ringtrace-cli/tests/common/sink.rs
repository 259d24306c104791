//! A receiver of OTLP/HTTP requests for the tests whose records Jaeger does not take
//! (log records): it answers every request 200 with an empty body (a full success,
//! as the OTLP/HTTP specification allows) and keeps each request's path and body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request received: its path and body.
pub type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// Reads one HTTP request from `c` (its head and `Content-Length` bytes): its path and
/// body.
pub fn read_request(c: &TcpStream) -> (String, Vec<u8>) {
    let mut r = BufReader::new(c);
    let (mut len, mut path) = (0, String::new());
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if path.is_empty() {
            path = line.split_whitespace().nth(1).unwrap_or_default().to_owned();
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (path, body)
}

/// Starts the receiver on a loopback port: its `HOST:PORT` and what it receives.
pub fn start() -> (String, Received) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let got: Received = Arc::default();
    let keep = got.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let request = read_request(&c);
            keep.lock().unwrap().push(request);
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (addr, got)
}
