//! Serve an in-memory or file export over NBD, for measuring the server with fio or
//! qemu-io (not a product: no durability, no arrays).
//!
//! nbd_mem_server LISTEN SIZE_MIB|file:PATH [WORKERS] [SECONDS]
//!   e.g. nbd_mem_server 127.0.0.1:10809 256 4 60
//!        nbd_mem_server 127.0.0.1:10809 file:disk.img

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use raidlab_store::nbd::{Backend, BlockSize, Errno, Listen, Server, EIO};

const STRIPE: usize = 1 << 20;

/// Memory in 1 MiB stripes, each behind its own lock, so parallel requests rarely contend.
struct Mem {
    stripes: Vec<RwLock<Vec<u8>>>,
}

/// A file driven with pread/pwrite, like `nbdkit file`.
struct Disk {
    file: File,
    size: u64,
}

enum Store {
    Mem(Mem),
    Disk(Disk),
}

impl Store {
    /// Visit the stripes covering [offset, offset + len) as (stripe, start in stripe, range
    /// in the request).
    fn each(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(usize, usize, std::ops::Range<usize>),
    ) {
        let mut done = 0;
        while done < len {
            let at = offset as usize + done;
            let (s, o) = (at / STRIPE, at % STRIPE);
            let n = (STRIPE - o).min(len - done);
            f(s, o, done..done + n);
            done += n;
        }
    }
}

impl Backend for Store {
    fn name(&self) -> &str {
        "mem"
    }
    fn description(&self) -> String {
        "raidlab example export".to_string()
    }
    fn size_bytes(&self) -> u64 {
        match self {
            Store::Mem(m) => (m.stripes.len() * STRIPE) as u64,
            Store::Disk(d) => d.size,
        }
    }
    fn block_size(&self) -> BlockSize {
        BlockSize {
            minimum: 512,
            preferred: 4096,
            maximum: 32 << 20,
        }
    }
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<(), Errno> {
        match self {
            Store::Mem(m) => {
                self.each(offset, buf.len(), |s, o, r| {
                    let st = m.stripes[s].read().unwrap_or_else(|e| e.into_inner());
                    let n = r.len();
                    buf[r].copy_from_slice(&st[o..o + n]);
                });
                Ok(())
            }
            Store::Disk(d) => d.file.read_exact_at(buf, offset).map_err(|_| EIO),
        }
    }
    fn write(&self, offset: u64, data: &[u8], _fua: bool) -> Result<(), Errno> {
        match self {
            Store::Mem(m) => {
                self.each(offset, data.len(), |s, o, r| {
                    let mut st = m.stripes[s].write().unwrap_or_else(|e| e.into_inner());
                    st[o..o + r.len()].copy_from_slice(&data[r]);
                });
                Ok(())
            }
            Store::Disk(d) => d.file.write_all_at(data, offset).map_err(|_| EIO),
        }
    }
    fn flush(&self) -> Result<(), Errno> {
        match self {
            Store::Mem(_) => Ok(()),
            Store::Disk(d) => d.file.sync_data().map_err(|_| EIO),
        }
    }
    fn trim(&self, _offset: u64, _len: u64, _fua: bool) -> Result<(), Errno> {
        Ok(())
    }
    fn write_zeroes(&self, offset: u64, len: u64, fua: bool) -> Result<(), Errno> {
        let zeroes = vec![0u8; len.min(1 << 20) as usize];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(zeroes.len() as u64) as usize;
            self.write(offset + done, &zeroes[..n], fua)?;
            done += n as u64;
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: nbd_mem_server LISTEN SIZE_MIB|file:PATH [WORKERS] [SECONDS]".into());
    }
    let listen = Listen::parse(&args[1])?;
    let store = if let Some(path) = args[2].strip_prefix("file:") {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let size = file.metadata()?.len();
        Store::Disk(Disk { file, size })
    } else {
        let mib: usize = args[2].parse()?;
        Store::Mem(Mem {
            stripes: (0..mib).map(|_| RwLock::new(vec![0; STRIPE])).collect(),
        })
    };
    let mut server = Server::bind(&listen)?;
    if let Some(w) = args.get(3) {
        server = server.with_workers(w.parse()?);
    }
    let seconds: u64 = args.get(4).map_or(Ok(60), |s| s.parse())?;
    eprintln!("accepting connections on {}", server.local_addr());
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(seconds));
        s.store(true, Ordering::Relaxed);
    });
    let stats = server.run(Arc::new(store), stop)?;
    eprintln!("{stats:?}");
    Ok(())
}
