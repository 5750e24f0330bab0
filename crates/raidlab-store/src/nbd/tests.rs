//! Server and client tests over loopback TCP and Unix sockets, with an in-memory backend;
//! interoperability with qemu-io, nbdinfo and nbdcopy when they are installed. This file
//! holds the shared test kit; the tests are in `tests/`.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::proto::*;
use super::*;
use crate::ctrl::tests_pattern::pattern;

const MIB: usize = 1 << 20;
const PANIC_AT: u64 = 3 * 4096;
const EIO_AT: u64 = 5 * 4096;

/// A `Vec<u8>` export. Trim zeroes (so a model can predict reads); `delay` slows every call.
struct Mem {
    name: String,
    data: RwLock<Vec<u8>>,
    block: BlockSize,
    read_only: bool,
    faulty: bool,
    delay: Duration,
    started: AtomicUsize,
    flushes: AtomicU64,
    fua: AtomicU64,
}

impl Mem {
    fn new(size: usize) -> Mem {
        Mem {
            name: "mem0".to_string(),
            data: RwLock::new(vec![0; size]),
            block: BlockSize {
                minimum: 4096,
                preferred: 65536,
                maximum: 4 * MIB as u32,
            },
            read_only: false,
            faulty: false,
            delay: Duration::ZERO,
            started: AtomicUsize::new(0),
            flushes: AtomicU64::new(0),
            fua: AtomicU64::new(0),
        }
    }

    fn enter(&self, fua: bool) {
        self.started.fetch_add(1, Ordering::SeqCst);
        if fua {
            self.fua.fetch_add(1, Ordering::SeqCst);
        }
        if !self.delay.is_zero() {
            thread::sleep(self.delay);
        }
    }

    fn fill(&self, offset: u64, len: u64, byte: u8) {
        let mut d = self.data.write().unwrap();
        d[offset as usize..(offset + len) as usize].fill(byte);
    }
}

impl Backend for Mem {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> String {
        "in-memory test export".to_string()
    }
    fn size_bytes(&self) -> u64 {
        self.data.read().unwrap().len() as u64
    }
    fn block_size(&self) -> BlockSize {
        self.block
    }
    fn read_only(&self) -> bool {
        self.read_only
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        self.enter(false);
        // If `faulty`, offsets at the magic values stand for a backend bug (a panic) or an I/O error.
        match offset {
            _ if !self.faulty => {}
            PANIC_AT => panic!("test backend panics on purpose"),
            EIO_AT => return Err(EIO),
            _ => {}
        }
        let d = self.data.read().unwrap();
        buf.copy_from_slice(&d[offset as usize..offset as usize + buf.len()]);
        Ok(())
    }
    fn write(&self, offset: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        self.enter(fua);
        let mut d = self.data.write().unwrap();
        d[offset as usize..offset as usize + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn flush(&self) -> Result<(), Errno> {
        self.enter(false);
        self.flushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn trim(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.enter(fua);
        self.fill(offset, len, 0);
        Ok(())
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.enter(fua);
        self.fill(offset, len, 0);
        Ok(())
    }
}

/// A server running on a thread; stopped and joined on drop, so no test leaks one.
struct Running {
    addr: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<std::io::Result<ServeStats>>>,
}

impl Running {
    fn start(backend: Arc<Mem>) -> Running {
        Running::start_on(&Listen::Tcp("127.0.0.1:0".parse().unwrap()), backend, None)
    }

    fn start_on(listen: &Listen, backend: Arc<Mem>, workers: Option<usize>) -> Running {
        Running::start_with(listen, backend, workers, Limits::default())
    }

    fn start_with(
        listen: &Listen,
        backend: Arc<Mem>,
        workers: Option<usize>,
        limits: Limits,
    ) -> Running {
        let mut server = Server::bind(listen).unwrap().with_limits(limits);
        if let Some(w) = workers {
            server = server.with_workers(w);
        }
        let addr = server.local_addr();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let thread = Some(thread::spawn(move || server.run(backend, s)));
        Running { addr, stop, thread }
    }

    fn uri(&self) -> String {
        format!("nbd://{}", self.addr)
    }

    /// Stop, wait (bounded) for `run` to return, and give its totals.
    fn finish(mut self) -> ServeStats {
        self.stop.store(true, Ordering::SeqCst);
        let t = self.thread.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !t.is_finished() {
            assert!(Instant::now() < deadline, "server did not stop");
            thread::sleep(Duration::from_millis(5));
        }
        t.join().unwrap().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A hand-driven connection for handshake and protocol-violation tests.
struct Raw {
    s: TcpStream,
}

impl Raw {
    /// Connect, read the greeting, send `flags`.
    fn connect(addr: &str, flags: u32) -> Raw {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut raw = Raw { s };
        let mut g = [0u8; 18];
        raw.s.read_exact(&mut g).unwrap();
        assert_eq!(g, greeting());
        raw.s.write_all(&flags.to_be_bytes()).unwrap();
        raw
    }

    fn option(&mut self, option: u32, data: &[u8]) {
        let mut m = IHAVEOPT.to_be_bytes().to_vec();
        m.extend_from_slice(&option.to_be_bytes());
        m.extend_from_slice(&(data.len() as u32).to_be_bytes());
        m.extend_from_slice(data);
        self.s.write_all(&m).unwrap();
    }

    /// (option, reply type, data)
    fn reply(&mut self) -> (u32, u32, Vec<u8>) {
        let mut h = [0u8; 20];
        self.s.read_exact(&mut h).unwrap();
        assert_eq!(
            u64::from_be_bytes(h[..8].try_into().unwrap()),
            OPT_REPLY_MAGIC
        );
        let len = u32::from_be_bytes(h[16..].try_into().unwrap()) as usize;
        let mut d = vec![0u8; len];
        self.s.read_exact(&mut d).unwrap();
        let be = |r: &[u8]| u32::from_be_bytes(r.try_into().unwrap());
        (be(&h[8..12]), be(&h[12..16]), d)
    }

    fn go(&mut self, name: &str, infos: &[u16]) {
        self.option(OPT_GO, &info_data(name, infos));
        loop {
            let (opt, rep, _) = self.reply();
            assert_eq!(opt, OPT_GO);
            if rep == REP_ACK {
                return;
            }
            assert_eq!(rep, REP_INFO);
        }
    }

    fn request(&mut self, flags: u16, kind: u16, cookie: u64, offset: u64, len: u32) {
        let r = Request {
            flags,
            kind,
            cookie,
            offset,
            len,
        };
        self.s.write_all(&r.encode()).unwrap();
    }

    fn simple_reply(&mut self) -> (Errno, u64) {
        let mut h = [0u8; REPLY_LEN];
        self.s.read_exact(&mut h).unwrap();
        parse_simple_reply(&h).unwrap()
    }

    /// The server closed the connection (end of stream or reset).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        !matches!(self.s.read(&mut b), Ok(n) if n > 0)
    }
}

fn info_data(name: &str, infos: &[u16]) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&(infos.len() as u16).to_be_bytes());
    for i in infos {
        d.extend_from_slice(&i.to_be_bytes());
    }
    d
}

fn server_errno(r: Result<(), ClientError>) -> Errno {
    match r {
        Err(ClientError::Server(e)) => e,
        other => panic!("expected a server error, got {other:?}"),
    }
}

mod hostile;
mod interop;
mod load;
mod protocol;
#[cfg(feature = "tls-psk")]
mod psk;
mod tls;
mod tls_handshake;
