//! A small NBD client: fixed-newstyle handshake with NBD_OPT_GO (falling back to
//! NBD_OPT_EXPORT_NAME), simple replies, blocking calls and a pipelined API.
//!
//! URIs (see `nbd::uri`): `nbd://HOST[:PORT][/EXPORT]` and `nbd+unix:///EXPORT?socket=PATH`;
//! with TLS (NBD_OPT_STARTTLS first, then everything over TLS) `nbds://` and `nbds+unix://`,
//! which need either `tls-certificates=DIR` (libnbd's layout: `ca-cert.pem` to check the
//! server, and `client-cert.pem` with `client-key.pem` if present, offered to a server that
//! asks; `tls-hostname=NAME` is the name the server certificate must carry, by default the
//! URI's host, or `localhost` over a Unix socket), or `tls-psk-file=FILE` with the user in
//! the URI (`nbds://USER@HOST/`: the identity, whose key the file holds; TLS-PSK).
//!
//! Pipelining: `submit_*` sends a request and returns its handle, `wait_any` returns the next
//! reply. Keep at most a few dozen requests in flight and collect their replies: a server
//! stops reading once its per-connection bound is reached, and this client is one thread.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::proto::{
    parse_simple_reply, read_full, Request, CMD_DISC, CMD_FLAG_FUA, CMD_FLUSH, CMD_READ, CMD_TRIM,
    CMD_WRITE, CMD_WRITE_ZEROES, FLAG_C_FIXED_NEWSTYLE, FLAG_C_NO_ZEROES, FLAG_FIXED_NEWSTYLE,
    FLAG_NO_ZEROES, IHAVEOPT, INFO_BLOCK_SIZE, INFO_EXPORT, NBDMAGIC, OPT_EXPORT_NAME, OPT_GO,
    OPT_REPLY_MAGIC, OPT_STARTTLS, REPLY_LEN, REP_ACK, REP_ERR_UNSUP, REP_INFO,
};
use super::server::Stream;
use super::tls::{client_config, ClientTls, TlsStream};
#[cfg(test)]
pub(crate) use super::uri::parse_uri;
pub(crate) use super::uri::{parse_uri_full, Target, Uri};
use super::{BlockSize, Errno};

/// Requests in flight on one client at most (a bound on the pending table).
pub const MAX_PENDING: usize = 1024;
/// Largest option reply accepted during the handshake.
const MAX_OPTION_REPLY: u32 = 64 << 10;
/// Option replies read for one NBD_OPT_GO before giving up.
const MAX_OPTION_REPLIES: usize = 64;
/// The TLS handshake's deadline.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Block sizes assumed when the server does not advertise any (the spec's defaults).
const DEFAULT_BLOCK: BlockSize = BlockSize {
    minimum: 1,
    preferred: 4096,
    maximum: 32 << 20,
};

/// A failed client call: the connection broke, or the server answered with an error.
#[derive(Debug)]
pub enum ClientError {
    Io(io::Error),
    Server(Errno),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "NBD connection: {e}"),
            ClientError::Server(e) => write!(f, "NBD server error: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// One finished pipelined request.
#[derive(Debug)]
pub struct Completion {
    pub handle: u64,
    pub result: Result<(), Errno>,
    /// The data of a successful read; empty otherwise.
    pub data: Vec<u8>,
}

/// A connection to one export.
pub struct Client {
    reader: BufReader<Stream>,
    writer: Stream,
    size: u64,
    flags: u16,
    block: BlockSize,
    next_cookie: u64,
    /// Cookie → (command, length) of requests awaiting a reply.
    pending: HashMap<u64, (u16, u32)>,
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

impl Client {
    /// Connect and do the handshake (over TLS for an `nbds` URI).
    pub fn connect(uri: &str) -> io::Result<Client> {
        Client::connect_within(uri, None)
    }

    /// `connect`, with the TCP connect and every read and write of the handshake bounded by
    /// `timeout` (a host that is down must not hang its caller); the socket has no timeouts
    /// once connected.
    pub fn connect_within(uri: &str, timeout: Option<Duration>) -> io::Result<Client> {
        let Uri {
            target,
            export,
            tls,
        } = parse_uri_full(uri)?;
        let tls = tls.map(|t| client_tls(uri, t)).transpose()?;
        let stream = match target {
            Target::Tcp(addr) => {
                let s = match timeout {
                    None => TcpStream::connect(addr)?,
                    Some(t) => connect_tcp_within(&addr, t)?,
                };
                s.set_nodelay(true)?;
                Stream::Tcp(s)
            }
            Target::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
        };
        stream.set_read_timeout(timeout)?;
        stream.set_write_timeout(timeout)?;
        let writer = stream.try_clone()?;
        let mut client = Client {
            reader: BufReader::with_capacity(64 << 10, stream),
            writer,
            size: 0,
            flags: 0,
            block: DEFAULT_BLOCK,
            next_cookie: 1,
            pending: HashMap::new(),
        };
        client.handshake(export.as_bytes(), tls)?;
        client.writer.set_read_timeout(None)?;
        client.writer.set_write_timeout(None)?;
        Ok(client)
    }

    /// The connection after the handshake, for a caller that runs its own request loop
    /// (`member::nbd`): reader, writer, export size, transmission flags and block sizes.
    /// Only with nothing in flight.
    pub(crate) fn into_parts(self) -> (BufReader<Stream>, Stream, u64, u16, BlockSize) {
        assert!(
            self.pending.is_empty(),
            "into_parts with requests in flight"
        );
        (self.reader, self.writer, self.size, self.flags, self.block)
    }

    /// NBD_OPT_STARTTLS, then the TLS handshake; the reader and writer go through TLS.
    fn start_tls(&mut self, tls: &ClientTls) -> io::Result<()> {
        self.send_option(OPT_STARTTLS, &[])?;
        let mut head = [0u8; 20];
        self.reader.read_exact(&mut head)?;
        let magic = u64::from_be_bytes(head[..8].try_into().unwrap_or_default());
        let reply = u32::from_be_bytes(head[12..16].try_into().unwrap_or_default());
        let len = u32::from_be_bytes(head[16..].try_into().unwrap_or_default());
        if magic != OPT_REPLY_MAGIC || len > MAX_OPTION_REPLY {
            return Err(invalid("bad option reply"));
        }
        let mut body = vec![0u8; len as usize];
        self.reader.read_exact(&mut body)?;
        if reply != REP_ACK {
            // Going on in plain text would defeat the point: a TLS URI never does.
            return Err(io::Error::other(format!(
                "server refused NBD_OPT_STARTTLS (reply {reply:#x}): {}",
                String::from_utf8_lossy(&body)
            )));
        }
        if !self.reader.buffer().is_empty() {
            return Err(invalid("server sent data after NBD_OPT_STARTTLS"));
        }
        let raw = self.writer.try_clone()?;
        let tls = TlsStream::connect_with(raw, tls, Instant::now() + TLS_HANDSHAKE_TIMEOUT)?;
        tls.raw().set_read_timeout(None)?;
        self.reader = BufReader::with_capacity(64 << 10, Stream::Tls(Box::new(tls.try_clone()?)));
        self.writer = Stream::Tls(Box::new(tls));
        Ok(())
    }

    fn handshake(&mut self, export: &[u8], tls: Option<ClientTls>) -> io::Result<()> {
        let mut greet = [0u8; 18];
        self.reader.read_exact(&mut greet)?;
        let magic = u64::from_be_bytes(greet[..8].try_into().unwrap_or_default());
        let opt = u64::from_be_bytes(greet[8..16].try_into().unwrap_or_default());
        let hflags = u16::from_be_bytes([greet[16], greet[17]]);
        if magic != NBDMAGIC || opt != IHAVEOPT {
            return Err(invalid("not a newstyle NBD server"));
        }
        if hflags & FLAG_FIXED_NEWSTYLE == 0 {
            return Err(invalid("server does not do fixed newstyle negotiation"));
        }
        let no_zeroes = hflags & FLAG_NO_ZEROES != 0;
        let cflags = FLAG_C_FIXED_NEWSTYLE | if no_zeroes { FLAG_C_NO_ZEROES } else { 0 };
        self.writer.write_all(&cflags.to_be_bytes())?;
        if let Some(tls) = &tls {
            self.start_tls(tls)?;
        }

        // NBD_OPT_GO asking for the block sizes (we honour them).
        let mut data = Vec::with_capacity(export.len() + 8);
        data.extend_from_slice(&(export.len() as u32).to_be_bytes());
        data.extend_from_slice(export);
        data.extend_from_slice(&1u16.to_be_bytes());
        data.extend_from_slice(&INFO_BLOCK_SIZE.to_be_bytes());
        self.send_option(OPT_GO, &data)?;
        let mut got_export = false;
        for _ in 0..MAX_OPTION_REPLIES {
            let mut head = [0u8; 20];
            self.reader.read_exact(&mut head)?;
            let magic = u64::from_be_bytes(head[..8].try_into().unwrap_or_default());
            let reply = u32::from_be_bytes(head[12..16].try_into().unwrap_or_default());
            let len = u32::from_be_bytes(head[16..].try_into().unwrap_or_default());
            if magic != OPT_REPLY_MAGIC || len > MAX_OPTION_REPLY {
                return Err(invalid("bad option reply"));
            }
            let mut body = vec![0u8; len as usize];
            self.reader.read_exact(&mut body)?;
            match reply {
                REP_ACK if got_export => return Ok(()),
                REP_ACK => return Err(invalid("server sent no NBD_INFO_EXPORT")),
                REP_INFO => got_export |= self.take_info(&body),
                REP_ERR_UNSUP => return self.export_name(export, no_zeroes),
                r if r & (1 << 31) != 0 => {
                    let msg = String::from_utf8_lossy(&body);
                    return Err(io::Error::other(format!(
                        "server refused export {:?} (reply {:#x}): {msg}",
                        String::from_utf8_lossy(export),
                        r
                    )));
                }
                _ => {} // Replies we do not know are ignored, as the spec asks.
            }
        }
        Err(invalid("too many option replies"))
    }

    /// Record an NBD_REP_INFO; true if it was NBD_INFO_EXPORT.
    fn take_info(&mut self, body: &[u8]) -> bool {
        let be32 = |b: &[u8]| u32::from_be_bytes(b.try_into().unwrap_or_default());
        match body.get(..2).map(|t| u16::from_be_bytes([t[0], t[1]])) {
            Some(INFO_EXPORT) if body.len() == 12 => {
                self.size = u64::from_be_bytes(body[2..10].try_into().unwrap_or_default());
                self.flags = u16::from_be_bytes([body[10], body[11]]);
                true
            }
            Some(INFO_BLOCK_SIZE) if body.len() == 14 => {
                self.block = BlockSize {
                    minimum: be32(&body[2..6]),
                    preferred: be32(&body[6..10]),
                    maximum: be32(&body[10..14]),
                };
                false
            }
            _ => false,
        }
    }

    /// The old way in, for servers without NBD_OPT_GO.
    fn export_name(&mut self, export: &[u8], no_zeroes: bool) -> io::Result<()> {
        self.send_option(OPT_EXPORT_NAME, export)?;
        let mut reply = [0u8; 10];
        self.reader.read_exact(&mut reply)?;
        self.size = u64::from_be_bytes(reply[..8].try_into().unwrap_or_default());
        self.flags = u16::from_be_bytes([reply[8], reply[9]]);
        if !no_zeroes {
            let mut zeroes = [0u8; 124];
            self.reader.read_exact(&mut zeroes)?;
        }
        Ok(())
    }

    fn send_option(&mut self, option: u32, data: &[u8]) -> io::Result<()> {
        let mut head = [0u8; 16];
        head[..8].copy_from_slice(&IHAVEOPT.to_be_bytes());
        head[8..12].copy_from_slice(&option.to_be_bytes());
        head[12..].copy_from_slice(&(data.len() as u32).to_be_bytes());
        self.writer.write_all2(&head, data)
    }

    pub fn size_bytes(&self) -> u64 {
        self.size
    }

    pub fn block_size(&self) -> BlockSize {
        self.block
    }

    /// The transmission flags the server sent (`proto::FLAG_*`).
    pub fn transmission_flags(&self) -> u16 {
        self.flags
    }

    /// Requests sent and not yet collected with `wait_any`.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// Send any request (tests use it for requests a well-behaved client never sends).
    /// `payload` follows the header as is.
    pub fn submit_raw(
        &mut self,
        flags: u16,
        kind: u16,
        offset: u64,
        len: u32,
        payload: &[u8],
    ) -> io::Result<u64> {
        if self.pending.len() >= MAX_PENDING {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "too many requests in flight",
            ));
        }
        let cookie = self.next_cookie;
        self.next_cookie = self.next_cookie.wrapping_add(1);
        let head = Request {
            flags,
            kind,
            cookie,
            offset,
            len,
        }
        .encode();
        self.writer.write_all2(&head, payload)?;
        self.pending.insert(cookie, (kind, len));
        Ok(cookie)
    }

    pub fn submit_read(&mut self, offset: u64, len: u32) -> io::Result<u64> {
        self.submit_raw(0, CMD_READ, offset, len, &[])
    }

    pub fn submit_write(&mut self, offset: u64, data: &[u8], fua: bool) -> io::Result<u64> {
        let len = u32::try_from(data.len()).map_err(|_| invalid("write too large"))?;
        self.submit_raw(fua_flag(fua), CMD_WRITE, offset, len, data)
    }

    pub fn submit_flush(&mut self) -> io::Result<u64> {
        self.submit_raw(0, CMD_FLUSH, 0, 0, &[])
    }

    pub fn submit_trim(&mut self, offset: u64, len: u32, fua: bool) -> io::Result<u64> {
        self.submit_raw(fua_flag(fua), CMD_TRIM, offset, len, &[])
    }

    pub fn submit_write_zeroes(&mut self, offset: u64, len: u32, fua: bool) -> io::Result<u64> {
        self.submit_raw(fua_flag(fua), CMD_WRITE_ZEROES, offset, len, &[])
    }

    /// Read the next reply header; returns (cookie, result, command, length).
    fn next_reply(&mut self) -> io::Result<(u64, Result<(), Errno>, u16, u32)> {
        let mut head = [0u8; REPLY_LEN];
        if !read_full(&mut self.reader, &mut head)? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let (error, cookie) =
            parse_simple_reply(&head).ok_or_else(|| invalid("bad reply magic"))?;
        let (kind, len) = self
            .pending
            .remove(&cookie)
            .ok_or_else(|| invalid("reply to no request"))?;
        let result = if error.0 == 0 { Ok(()) } else { Err(error) };
        Ok((cookie, result, kind, len))
    }

    /// Wait for the next reply to any request in flight.
    pub fn wait_any(&mut self) -> io::Result<Completion> {
        if self.pending.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no request in flight",
            ));
        }
        let (handle, result, kind, len) = self.next_reply()?;
        let mut data = Vec::new();
        if result.is_ok() && kind == CMD_READ {
            data.resize(len as usize, 0);
            self.reader.read_exact(&mut data)?;
        }
        Ok(Completion {
            handle,
            result,
            data,
        })
    }

    /// Send one request and wait for its reply; reads land in `buf`. Only with nothing else
    /// in flight (replies would otherwise need sorting out).
    fn call(
        &mut self,
        flags: u16,
        kind: u16,
        offset: u64,
        len: u32,
        payload: &[u8],
        buf: &mut [u8],
    ) -> Result<(), ClientError> {
        if !self.pending.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "blocking call with pipelined requests in flight",
            )
            .into());
        }
        self.submit_raw(flags, kind, offset, len, payload)?;
        let (_, result, _, _) = self.next_reply()?;
        result.map_err(ClientError::Server)?;
        if kind == CMD_READ {
            self.reader.read_exact(buf)?;
        }
        Ok(())
    }

    pub fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), ClientError> {
        let len = u32::try_from(buf.len()).map_err(|_| invalid("read too large"))?;
        self.call(0, CMD_READ, offset, len, &[], buf)
    }

    pub fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> Result<(), ClientError> {
        let len = u32::try_from(data.len()).map_err(|_| invalid("write too large"))?;
        self.call(fua_flag(fua), CMD_WRITE, offset, len, data, &mut [])
    }

    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.call(0, CMD_FLUSH, 0, 0, &[], &mut [])
    }

    pub fn trim(&mut self, offset: u64, len: u32, fua: bool) -> Result<(), ClientError> {
        self.call(fua_flag(fua), CMD_TRIM, offset, len, &[], &mut [])
    }

    pub fn write_zeroes(&mut self, offset: u64, len: u32, fua: bool) -> Result<(), ClientError> {
        self.call(fua_flag(fua), CMD_WRITE_ZEROES, offset, len, &[], &mut [])
    }

    /// Soft disconnect (NBD_CMD_DISC). Collect replies first: the server finishes what is in
    /// flight, but replies still unread are lost with the connection.
    pub fn disconnect(mut self) -> io::Result<()> {
        let head = Request {
            flags: 0,
            kind: CMD_DISC,
            cookie: 0,
            offset: 0,
            len: 0,
        }
        .encode();
        self.writer.write_all2(&head, &[])?;
        self.writer.close_notify();
        self.writer.shutdown(Shutdown::Write);
        Ok(())
    }
}

/// Connect to `addr` (`HOST:PORT`), each resolved address tried within `timeout`.
/// The TLS an `nbds` URI asks for: X.509 (`tls-certificates=DIR`) or TLS-PSK
/// (`tls-psk-file=FILE` and a user); errors name the URI and the parameter.
fn client_tls(uri: &str, t: super::uri::UriTls) -> io::Result<ClientTls> {
    let input = |m: String| io::Error::new(io::ErrorKind::InvalidInput, format!("{uri}: {m}"));
    match (t.certificates, t.psk_file) {
        (Some(_), Some(_)) => Err(input(
            "tls-certificates and tls-psk-file exclude each other".into(),
        )),
        (None, None) => Err(input(
            "an nbds URI needs tls-certificates=DIR (with ca-cert.pem) or tls-psk-file=FILE".into(),
        )),
        (Some(dir), None) => {
            let (cert, key) = (dir.join("client-cert.pem"), dir.join("client-key.pem"));
            let client = (cert.exists() && key.exists()).then_some((&*cert, &*key));
            let config = client_config(&dir.join("ca-cert.pem"), client)
                .map_err(|e| input(format!("{}: {e}", e.option)))?;
            Ok(ClientTls::X509 {
                config,
                hostname: t.hostname,
            })
        }
        (None, Some(file)) => {
            let Some(user) = t.username else {
                return Err(input(
                    "tls-psk-file needs the user in the URI (nbds://USER@HOST/...)".into(),
                ));
            };
            ClientTls::psk("tls-psk-file", &file, &user)
                .map_err(|e| input(format!("{}: {e}", e.option)))
        }
    }
}

fn connect_tcp_within(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    use std::net::ToSocketAddrs;
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr}: no address"));
    // Bounded: the resolver's answer is a finite list.
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn fua_flag(fua: bool) -> u16 {
    if fua {
        CMD_FLAG_FUA
    } else {
        0
    }
}
