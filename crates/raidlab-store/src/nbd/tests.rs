//! Server and client tests over loopback TCP and Unix sockets, with an in-memory backend;
//! interoperability with qemu-io, nbdinfo and nbdcopy when they are installed.

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
        let mut server = Server::bind(listen).unwrap();
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

#[test]
fn listen_and_uri_parsing() {
    assert_eq!(
        Listen::parse("127.0.0.1:10809"),
        Ok(Listen::Tcp("127.0.0.1:10809".parse().unwrap()))
    );
    assert_eq!(
        Listen::parse("[::1]:0"),
        Ok(Listen::Tcp("[::1]:0".parse().unwrap()))
    );
    assert_eq!(
        Listen::parse("unix:/x/sock"),
        Ok(Listen::Unix(PathBuf::from("/x/sock")))
    );
    assert!(Listen::parse("unix:").is_err());
    assert!(Listen::parse("localhost").is_err());
    use client::{parse_uri, Target};
    let tcp = |a: &str| Target::Tcp(a.to_string());
    assert_eq!(parse_uri("nbd://h:1/e").unwrap(), (tcp("h:1"), "e".into()));
    assert_eq!(parse_uri("nbd://h").unwrap(), (tcp("h:10809"), "".into()));
    assert_eq!(
        parse_uri("nbd://[::1]").unwrap(),
        (tcp("[::1]:10809"), "".into())
    );
    assert_eq!(
        parse_uri("nbd://[::1]:5/a%20b").unwrap(),
        (tcp("[::1]:5"), "a b".into())
    );
    assert_eq!(
        parse_uri("nbd+unix:///ex?socket=/t/s").unwrap(),
        (Target::Unix("/t/s".into()), "ex".into())
    );
    for bad in [
        "http://x",
        "nbd://",
        "nbd+unix://x/e?socket=/s",
        "nbd+unix:///e",
        "nbd://h/%zz",
    ] {
        assert!(parse_uri(bad).is_err(), "{bad}");
    }
}

#[test]
fn decide_checks_requests() {
    let ex = ExportInfo {
        name: "a".into(),
        description: String::new(),
        size: 1 << 20,
        flags: ExportInfo::flags_for(false, true),
        block: BlockSize {
            minimum: 4096,
            preferred: 4096,
            maximum: 65536,
        },
    };
    let req = |flags, kind, offset, len| Request {
        flags,
        kind,
        cookie: 7,
        offset,
        len,
    };
    let d = |r: Request| decide(&r, &ex);
    assert_eq!(d(req(0, CMD_READ, 0, 4096)), Decision::Run(Command::Read));
    assert_eq!(
        d(req(1, CMD_WRITE, 4096, 4096)),
        Decision::Run(Command::Write { fua: true })
    );
    assert_eq!(
        d(req(3, CMD_WRITE_ZEROES, 0, 1 << 20)),
        Decision::Run(Command::WriteZeroes { fua: true })
    );
    assert_eq!(
        d(req(0, CMD_TRIM, 0, 1 << 20)),
        Decision::Run(Command::Trim { fua: false })
    );
    assert_eq!(d(req(1, CMD_FLUSH, 0, 0)), Decision::Run(Command::Flush));
    assert_eq!(d(req(0, CMD_DISC, 0, 0)), Decision::Disconnect);
    assert_eq!(d(req(0, CMD_READ, 0, 0)), Decision::Done);
    assert_eq!(d(req(0, 99, 0, 4096)), Decision::Reject(EINVAL));
    assert_eq!(d(req(0, 5, 0, 4096)), Decision::Reject(EINVAL)); // CACHE: not offered
    assert_eq!(d(req(2, CMD_WRITE, 0, 4096)), Decision::Reject(EINVAL)); // NO_HOLE on WRITE
    assert_eq!(
        d(req(1 << 4, CMD_WRITE_ZEROES, 0, 4096)),
        Decision::Reject(EINVAL)
    ); // FAST_ZERO
    assert_eq!(d(req(0, CMD_READ, 512, 4096)), Decision::Reject(EINVAL));
    assert_eq!(d(req(0, CMD_WRITE, 0, 512)), Decision::Reject(EINVAL));
    assert_eq!(
        d(req(0, CMD_READ, 0, 65536 + 4096)),
        Decision::Reject(EINVAL)
    );
    assert_eq!(d(req(0, CMD_READ, 1 << 20, 4096)), Decision::Reject(EINVAL));
    assert_eq!(d(req(0, CMD_TRIM, 1 << 20, 4096)), Decision::Reject(EINVAL));
    assert_eq!(
        d(req(0, CMD_WRITE, 1 << 20, 4096)),
        Decision::Reject(ENOSPC)
    );
    assert_eq!(
        d(req(0, CMD_WRITE_ZEROES, 1 << 20, 4096)),
        Decision::Reject(ENOSPC)
    );
    assert_eq!(
        d(req(0, CMD_READ, u64::MAX - 4095, 8192)),
        Decision::Reject(EINVAL)
    );
    let ro = ExportInfo {
        flags: ExportInfo::flags_for(true, false),
        ..ex.clone()
    };
    assert_eq!(
        decide(&req(0, CMD_WRITE, 0, 4096), &ro),
        Decision::Reject(EPERM)
    );
    assert_eq!(
        decide(&req(0, CMD_TRIM, 0, 4096), &ro),
        Decision::Reject(EPERM)
    );
    assert_eq!(
        decide(&req(0, CMD_READ, 0, 4096), &ro),
        Decision::Run(Command::Read)
    );
    assert_eq!(
        parse_request(&req(0, CMD_READ, 0, 1).encode()),
        Some(req(0, CMD_READ, 0, 1))
    );
    let mut bad = req(0, CMD_READ, 0, 1).encode();
    bad[0] ^= 1;
    assert_eq!(parse_request(&bad), None);
    assert_eq!(
        parse_info_request(&info_data("ab", &[3, 1])),
        Some((&b"ab"[..], &[0, 3, 0, 1][..]))
    );
    assert_eq!(parse_info_request(&[0, 0, 0, 9, 1]), None);
    assert_eq!(parse_info_request(&[0, 0, 0, 0, 0, 1]), None);
}

#[test]
fn go_by_both_names_and_unix_socket() {
    let mem = Arc::new(Mem::new(8 * MIB));
    let srv = Running::start(Arc::clone(&mem));
    for uri in [srv.uri(), format!("{}/mem0", srv.uri())] {
        let c = Client::connect(&uri).unwrap();
        assert_eq!(c.size_bytes(), 8 * MIB as u64);
        assert_eq!(c.block_size(), mem.block);
        let f = c.transmission_flags();
        let want = FLAG_HAS_FLAGS
            | FLAG_SEND_FLUSH
            | FLAG_SEND_FUA
            | FLAG_SEND_TRIM
            | FLAG_SEND_WRITE_ZEROES
            | FLAG_CAN_MULTI_CONN;
        assert_eq!(f, want);
        c.disconnect().unwrap();
    }
    let err = Client::connect(&format!("{}/nope", srv.uri()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("nope"), "{err}");
    let stats = srv.finish();
    assert_eq!(stats.connections, 3);

    let dir = std::env::temp_dir().join(format!("raidlab-nbd-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("s");
    let srv = Running::start_on(&Listen::Unix(sock.clone()), Arc::clone(&mem), None);
    assert_eq!(srv.addr, format!("unix:{}", sock.display()));
    let mut c = Client::connect(&format!("nbd+unix:///mem0?socket={}", sock.display())).unwrap();
    c.write(0, &[7; 4096], false).unwrap();
    let mut b = [0u8; 4096];
    c.read(0, &mut b).unwrap();
    assert_eq!(b, [7; 4096]);
    c.disconnect().unwrap();
    srv.finish();
    assert!(!sock.exists(), "socket file left behind");
    let _ = std::fs::remove_dir(&dir);
}

#[test]
fn handshake_variants() {
    let mem = Arc::new(Mem::new(MIB));
    let srv = Running::start(Arc::clone(&mem));
    let both = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;

    // INFO with every information type, then GO, then a request.
    let mut r = Raw::connect(&srv.addr, both);
    r.option(
        OPT_INFO,
        &info_data("", &[INFO_NAME, INFO_DESCRIPTION, INFO_BLOCK_SIZE]),
    );
    let mut seen = HashSet::new();
    loop {
        let (opt, rep, d) = r.reply();
        assert_eq!(opt, OPT_INFO);
        if rep == REP_ACK {
            break;
        }
        assert_eq!(rep, REP_INFO);
        let t = u16::from_be_bytes([d[0], d[1]]);
        match t {
            INFO_EXPORT => assert_eq!(u64::from_be_bytes(d[2..10].try_into().unwrap()), MIB as u64),
            INFO_NAME => assert_eq!(&d[2..], b"mem0"),
            INFO_DESCRIPTION => assert_eq!(&d[2..], b"in-memory test export"),
            INFO_BLOCK_SIZE => assert_eq!(d[2..], [0, 0, 16, 0, 0, 1, 0, 0, 0, 64, 0, 0]),
            _ => panic!("unexpected info {t}"),
        }
        assert!(seen.insert(t));
    }
    assert_eq!(seen.len(), 4);
    r.go("mem0", &[INFO_BLOCK_SIZE]);
    r.request(0, CMD_READ, 5, 0, 4096);
    assert_eq!(r.simple_reply(), (Errno(0), 5));

    // LIST (and LIST with data), unknown export, unsupported options, oversized option; the
    // session carries on after each.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE);
    r.option(OPT_LIST, &[]);
    let (_, rep, d) = r.reply();
    assert_eq!(
        (rep, &d[..]),
        (REP_SERVER, &[0, 0, 0, 4, b'm', b'e', b'm', b'0'][..])
    );
    assert_eq!(r.reply().1, REP_ACK);
    r.option(OPT_LIST, b"x");
    assert_eq!(r.reply().1, REP_ERR_INVALID);
    r.option(OPT_GO, &info_data("other", &[]));
    assert_eq!(r.reply().1, REP_ERR_UNKNOWN);
    r.option(OPT_GO, &[0, 0, 0, 9, 0]);
    assert_eq!(r.reply().1, REP_ERR_INVALID);
    for opt in [OPT_STARTTLS, OPT_STRUCTURED_REPLY, 9, 10, 11, 4, 12345] {
        r.option(opt, &[]);
        assert_eq!(r.reply(), (opt, REP_ERR_UNSUP, vec![]));
    }
    r.option(OPT_INFO, &vec![0u8; MAX_OPTION_LEN as usize + 1]);
    assert_eq!(r.reply().1, REP_ERR_TOO_BIG);
    r.option(OPT_GO, &vec![1u8; 4 * MIB]);
    assert_eq!(r.reply().1, REP_ERR_TOO_BIG);
    r.go("", &[]);
    r.request(0, CMD_FLUSH, 9, 0, 0);
    assert_eq!(r.simple_reply(), (Errno(0), 9));

    // ABORT is acknowledged, then the server hangs up.
    let mut r = Raw::connect(&srv.addr, both);
    r.option(OPT_ABORT, &[]);
    assert_eq!(r.reply(), (OPT_ABORT, REP_ACK, vec![]));
    assert!(r.closed());

    // EXPORT_NAME, with and without the 124 zeroes.
    for (flags, tail) in [(both, 0), (FLAG_C_FIXED_NEWSTYLE, 124), (0, 124)] {
        let mut r = Raw::connect(&srv.addr, flags);
        r.option(OPT_EXPORT_NAME, b"mem0");
        let mut b = vec![0u8; 10 + tail];
        r.s.read_exact(&mut b).unwrap();
        assert_eq!(u64::from_be_bytes(b[..8].try_into().unwrap()), MIB as u64);
        assert!(b[10..].iter().all(|&x| x == 0));
        r.request(0, CMD_READ, 3, 0, 4096);
        assert_eq!(r.simple_reply(), (Errno(0), 3));
        let mut data = [1u8; 4096];
        r.s.read_exact(&mut data).unwrap();
        assert_eq!(data, [0; 4096]);
    }

    // An unknown EXPORT_NAME, unknown client flags, a bad option magic: closed.
    let mut r = Raw::connect(&srv.addr, both);
    r.option(OPT_EXPORT_NAME, b"nope");
    assert!(r.closed());
    let mut r = Raw::connect(&srv.addr, 1 << 5);
    assert!(r.closed());
    let mut r = Raw::connect(&srv.addr, both);
    r.s.write_all(&[0u8; 16]).unwrap();
    assert!(r.closed());
    // A client vanishing in the middle of an option, and in the middle of the flags.
    let mut r = Raw::connect(&srv.addr, both);
    r.s.write_all(&IHAVEOPT.to_be_bytes()).unwrap();
    drop(r);
    let mut s = TcpStream::connect(&srv.addr).unwrap();
    s.write_all(&[0, 0]).unwrap();
    drop(s);

    let mut c = Client::connect(&srv.uri()).unwrap();
    c.flush().unwrap();
    c.disconnect().unwrap();
    srv.finish();
}

#[test]
fn commands_and_fua() {
    let mem = Arc::new(Mem::new(4 * MIB));
    let srv = Running::start(Arc::clone(&mem));
    let mut c = Client::connect(&srv.uri()).unwrap();
    let data = pattern(1, 64 << 10);
    c.write(8192, &data, false).unwrap();
    c.write(MIB as u64, &data, true).unwrap();
    let mut back = vec![0u8; 64 << 10];
    c.read(8192, &mut back).unwrap();
    assert_eq!(back, data);
    assert_eq!(&mem.data.read().unwrap()[MIB..MIB + data.len()], &data[..]);
    c.flush().unwrap();
    assert_eq!(mem.flushes.load(Ordering::SeqCst), 1);
    c.write_zeroes(8192, 4096, false).unwrap();
    c.trim(12288, 8192, true).unwrap();
    // NO_HOLE is accepted on WRITE_ZEROES.
    let h = c
        .submit_raw(
            CMD_FLAG_NO_HOLE | CMD_FLAG_FUA,
            CMD_WRITE_ZEROES,
            MIB as u64,
            4096,
            &[],
        )
        .unwrap();
    let done = c.wait_any().unwrap();
    assert_eq!((done.handle, done.result), (h, Ok(())));
    assert_eq!(mem.fua.load(Ordering::SeqCst), 3);
    c.read(8192, &mut back).unwrap();
    assert!(back[..12288].iter().all(|&b| b == 0));
    assert_eq!(back[12288..], data[12288..]);
    // Whole export in 4 MiB (maximum) pieces.
    let mut whole = vec![0u8; 4 * MIB];
    c.read(0, &mut whole).unwrap();
    assert_eq!(&whole[..], &mem.data.read().unwrap()[..]);
    c.disconnect().unwrap();
    let stats = srv.finish();
    assert_eq!(stats.errors, 0);
    assert_eq!(stats.bytes_written, 2 * data.len() as u64);
}

#[test]
fn bad_requests_get_errors_and_the_connection_lives() {
    let mut m = Mem::new(MIB);
    m.block.maximum = 64 << 10;
    let mem = Arc::new(m);
    mem.fill(0, 4096, 0xab);
    let srv = Running::start(Arc::clone(&mem));
    let mut c = Client::connect(&srv.uri()).unwrap();
    let end = MIB as u64;
    let cases: Vec<(u16, u16, u64, u32, Errno)> = vec![
        (0, 99, 0, 4096, EINVAL),         // unknown command
        (0, 5, 0, 4096, EINVAL),          // CACHE, not advertised
        (0, CMD_READ, end, 4096, EINVAL), // past the end
        (0, CMD_TRIM, end - 4096, 8192, EINVAL),
        (0, CMD_WRITE, end, 4096, ENOSPC), // write past the end (payload discarded)
        (0, CMD_WRITE_ZEROES, end, 4096, ENOSPC),
        (0, CMD_READ, u64::MAX - 4095, 4096, EINVAL),
        (0, CMD_READ, 512, 4096, EINVAL),     // misaligned offset
        (0, CMD_READ, 0, 1000, EINVAL),       // misaligned length
        (0, CMD_WRITE, 0, 6000, EINVAL),      // misaligned write (payload discarded)
        (0, CMD_READ, 0, 128 << 10, EINVAL),  // beyond the maximum
        (0, CMD_WRITE, 0, 128 << 10, EINVAL), // beyond the maximum (payload discarded)
        (CMD_FLAG_NO_HOLE, CMD_WRITE, 0, 4096, EINVAL), // flag not valid for WRITE
        (1 << 7, CMD_READ, 0, 4096, EINVAL),  // unknown flag
        (1 << 2, CMD_READ, 0, 4096, EINVAL),  // DF without structured replies
    ];
    for (flags, kind, offset, len, want) in cases {
        let payload = if kind == CMD_WRITE {
            pattern(3, len as usize)
        } else {
            vec![]
        };
        let h = c.submit_raw(flags, kind, offset, len, &payload).unwrap();
        let done = c.wait_any().unwrap();
        assert_eq!(
            (done.handle, done.result),
            (h, Err(want)),
            "{kind} {flags:#x} {offset} {len}"
        );
        let mut b = [0u8; 4096];
        c.read(0, &mut b).unwrap();
        assert_eq!(b, [0xab; 4096], "after {kind} {flags:#x} {offset} {len}");
    }
    // Zero-length requests succeed without touching anything.
    c.write(0, &[], false).unwrap();
    c.read(0, &mut []).unwrap();
    // A maximal write and read still work.
    c.write(0, &vec![0xcd; 64 << 10], false).unwrap();
    assert_eq!(mem.data.read().unwrap()[65535], 0xcd);
    c.disconnect().unwrap();

    let mut ro = Mem::new(MIB);
    ro.read_only = true;
    let srv2 = Running::start(Arc::new(ro));
    let mut c = Client::connect(&srv2.uri()).unwrap();
    assert_ne!(c.transmission_flags() & FLAG_READ_ONLY, 0);
    assert_eq!(
        c.transmission_flags() & FLAG_CAN_MULTI_CONN,
        FLAG_CAN_MULTI_CONN
    );
    assert_eq!(server_errno(c.write(0, &[1; 4096], false)), EPERM);
    assert_eq!(server_errno(c.trim(0, 4096, false)), EPERM);
    assert_eq!(server_errno(c.write_zeroes(0, 4096, false)), EPERM);
    c.read(0, &mut [0u8; 4096]).unwrap();
    c.disconnect().unwrap();
    srv2.finish();
    let stats = srv.finish();
    assert!(stats.errors >= 15);
}

#[test]
fn broken_clients_do_not_hurt_others() {
    let mem = Arc::new(Mem::new(MIB));
    let srv = Running::start(Arc::clone(&mem));
    let mut good = Client::connect(&srv.uri()).unwrap();
    good.write(0, &[1; 4096], false).unwrap();

    // Half a write payload, then gone.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[INFO_BLOCK_SIZE]);
    r.request(0, CMD_WRITE, 1, 0, 65536);
    r.s.write_all(&[9; 30000]).unwrap();
    drop(r);
    // Half a request header, then gone.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[]);
    r.s.write_all(&REQUEST_MAGIC.to_be_bytes()).unwrap();
    drop(r);
    // A bad request magic: that connection is closed.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[]);
    r.s.write_all(&[0x55; REQUEST_LEN]).unwrap();
    assert!(r.closed());
    // A huge oversized write, discarded in pieces, then the client leaves half way.
    let mut r = Raw::connect(&srv.addr, FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    r.go("", &[]);
    r.request(0, CMD_WRITE, 2, 0, u32::MAX - 4095);
    r.s.write_all(&vec![0u8; 8 * MIB]).unwrap();
    drop(r);

    let mut b = [0u8; 4096];
    good.read(0, &mut b).unwrap();
    assert_eq!(b, [1; 4096]);
    let mut fresh = Client::connect(&srv.uri()).unwrap();
    fresh.read(0, &mut b).unwrap();
    assert_eq!(b, [1; 4096]);
    assert_eq!(
        mem.data.read().unwrap()[4096..65536]
            .iter()
            .filter(|&&x| x == 9)
            .count(),
        0
    );
    fresh.disconnect().unwrap();
    good.disconnect().unwrap();
    srv.finish();
}

/// `conns` connections, each keeping `depth` requests in flight on its own region, checked
/// against a model of that region. In-flight requests never overlap, so the model is exact.
fn pipelined(uri: &str, region: u64, conns: u64, depth: usize, ops: usize) {
    let threads: Vec<_> = (0..conns)
        .map(|t| {
            let uri = uri.to_string();
            thread::spawn(move || {
                let base = t * region;
                let blocks = region / 4096;
                let mut model = vec![0u8; region as usize];
                let mut c = Client::connect(&uri).unwrap();
                let mut busy: std::collections::HashMap<u64, (u64, u64, Option<Vec<u8>>)> =
                    Default::default();
                let mut taken = HashSet::new();
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t + 1);
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x >> 16
                };
                let (mut sent, mut done) = (0, 0);
                while done < ops {
                    while sent < ops && busy.len() < depth {
                        let first = next() % blocks;
                        let n = (1 + next() % 4).min(blocks - first);
                        if (first..first + n).any(|b| taken.contains(&b)) {
                            // Collect a reply first rather than retry without bound.
                            if busy.is_empty() {
                                continue;
                            }
                            break;
                        }
                        taken.extend(first..first + n);
                        let (off, len) = (first * 4096, n * 4096);
                        let h = match next() % 8 {
                            0..=3 => {
                                let expect = model[off as usize..(off + len) as usize].to_vec();
                                let h = c.submit_read(base + off, len as u32).unwrap();
                                busy.insert(h, (first, n, Some(expect)));
                                h
                            }
                            4..=6 => {
                                let d = pattern(next() + 1, len as usize);
                                model[off as usize..(off + len) as usize].copy_from_slice(&d);
                                let h = c.submit_write(base + off, &d, next() % 2 == 0).unwrap();
                                busy.insert(h, (first, n, None));
                                h
                            }
                            _ => {
                                model[off as usize..(off + len) as usize].fill(0);
                                let h = c
                                    .submit_write_zeroes(base + off, len as u32, false)
                                    .unwrap();
                                busy.insert(h, (first, n, None));
                                h
                            }
                        };
                        let _ = h;
                        sent += 1;
                    }
                    let comp = c.wait_any().unwrap();
                    assert_eq!(comp.result, Ok(()));
                    let (first, n, expect) = busy.remove(&comp.handle).unwrap();
                    if let Some(e) = expect {
                        assert!(comp.data == e, "conn {t}: read at block {first} differs");
                    }
                    for b in first..first + n {
                        taken.remove(&b);
                    }
                    done += 1;
                }
                let mut all = vec![0u8; region as usize];
                c.read(base, &mut all).unwrap();
                assert!(all == model, "conn {t}: final contents differ");
                c.disconnect().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn four_connections_pipelined_depth_32() {
    let region = 2 * MIB as u64;
    let mem = Arc::new(Mem::new(4 * region as usize));
    let srv = Running::start(Arc::clone(&mem));
    pipelined(&srv.uri(), region, 4, 32, 3000);
    let stats = srv.finish();
    assert_eq!(stats.errors, 0);
    assert!(stats.requests >= 4 * 3000);
}

#[test]
fn stop_drains_requests_in_flight() {
    let mut m = Mem::new(MIB);
    m.delay = Duration::from_millis(200);
    let mem = Arc::new(m);
    mem.fill(0, MIB as u64, 0x42);
    let srv = Running::start_on(
        &Listen::Tcp("127.0.0.1:0".parse().unwrap()),
        Arc::clone(&mem),
        Some(8),
    );
    let mut c = Client::connect(&srv.uri()).unwrap();
    let handles: HashSet<u64> = (0..8)
        .map(|i| c.submit_read(i * 4096, 4096).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while mem.started.load(Ordering::SeqCst) < 8 {
        assert!(Instant::now() < deadline, "requests did not start");
        thread::sleep(Duration::from_millis(2));
    }
    let t0 = Instant::now();
    let stats = srv.finish();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(stats.requests, 8);
    let mut got = HashSet::new();
    for _ in 0..8 {
        let done = c.wait_any().unwrap();
        assert_eq!(done.result, Ok(()));
        assert_eq!(done.data, vec![0x42; 4096]);
        got.insert(done.handle);
    }
    assert_eq!(got, handles);
    // Then the server has closed the connection.
    assert!(c.read(0, &mut [0u8; 4096]).is_err());
}

/// Run `cmd` if it is installed; `None` (after saying so) if not.
fn run_tool(cmd: &str, args: &[&str]) -> Option<std::process::Output> {
    match std::process::Command::new(cmd).args(args).output() {
        Ok(out) => Some(out),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("skipped: {cmd} not installed");
            None
        }
        Err(e) => panic!("{cmd}: {e}"),
    }
}

#[test]
fn interop_qemu_io() {
    let mem = Arc::new(Mem::new(4 * MIB));
    let srv = Running::start(Arc::clone(&mem));
    let uri = srv.uri();
    let args = [
        "-f",
        "raw",
        "-c",
        "write -P 0x5a 0 1M",
        "-c",
        "read -P 0x5a 0 1M",
        &uri,
    ];
    let Some(out) = run_tool("qemu-io", &args) else {
        return;
    };
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "qemu-io failed: {text}");
    assert!(!text.contains("Pattern verification failed"), "{text}");
    assert!(mem.data.read().unwrap()[..MIB].iter().all(|&b| b == 0x5a));
    assert!(mem.data.read().unwrap()[MIB..].iter().all(|&b| b == 0));
    // Flush, discard and write-zeroes through qemu too.
    let args = [
        "-f",
        "raw",
        "-c",
        "write -z 4096 8192",
        "-c",
        "discard 65536 65536",
        "-c",
        "flush",
        &uri,
    ];
    let out = run_tool("qemu-io", &args).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(mem.data.read().unwrap()[4096..12288]
        .iter()
        .all(|&b| b == 0));
    assert!(mem.flushes.load(Ordering::SeqCst) >= 1);
    srv.finish();
}

#[test]
fn interop_nbdinfo_and_nbdcopy() {
    let mem = Arc::new(Mem::new(4 * MIB));
    mem.fill(MIB as u64, 4096, 0x77);
    let srv = Running::start(Arc::clone(&mem));
    let uri = srv.uri();
    let Some(out) = run_tool("nbdinfo", &["--json", &uri]) else {
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nbdinfo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let compact: String = text.split_whitespace().collect();
    for want in [
        "\"export-size\":4194304",
        "\"block_size_minimum\":4096",
        "\"block_size_preferred\":65536",
        "\"block_size_maximum\":4194304",
        "\"export-name\":\"mem0\"",
        "\"can_multi_conn\":true",
    ] {
        assert!(compact.contains(want), "nbdinfo lacks {want}: {text}");
    }
    let out = run_tool("nbdinfo", &["--list", "--json", &uri]).unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"mem0\""));

    let dir = std::env::temp_dir().join(format!("raidlab-nbdcopy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("copy.img");
    let file_s = file.to_string_lossy().to_string();
    if let Some(out) = run_tool("nbdcopy", &[&uri, &file_s]) {
        assert!(
            out.status.success(),
            "nbdcopy: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(std::fs::read(&file).unwrap() == *mem.data.read().unwrap());
        // And back, with a different pattern, through several connections.
        let back = pattern(9, 4 * MIB);
        std::fs::write(&file, &back).unwrap();
        let out = run_tool("nbdcopy", &["--connections=4", &file_s, &uri]).unwrap();
        assert!(
            out.status.success(),
            "nbdcopy: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(*mem.data.read().unwrap() == back);
    }
    let _ = std::fs::remove_dir_all(&dir);
    srv.finish();
}

#[test]
fn backend_errors_and_panics_become_error_replies() {
    let mut m = Mem::new(MIB);
    m.faulty = true;
    let mem = Arc::new(m);
    let srv = Running::start_on(
        &Listen::Tcp("[::1]:0".parse().unwrap()),
        Arc::clone(&mem),
        Some(1),
    );
    assert!(srv.addr.starts_with("[::1]:"), "{}", srv.addr);
    let mut c = Client::connect(&srv.uri()).unwrap();
    let mut b = [0u8; 4096];
    assert_eq!(server_errno(c.read(EIO_AT, &mut b)), EIO);
    assert_eq!(server_errno(c.read(PANIC_AT, &mut b)), EIO);
    // The only worker survived its backend's panic.
    c.read(0, &mut b).unwrap();
    c.disconnect().unwrap();
    let stats = srv.finish();
    assert_eq!((stats.requests, stats.errors), (3, 2));
}
