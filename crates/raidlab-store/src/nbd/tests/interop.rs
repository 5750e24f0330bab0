//! Real clients: qemu-io, nbdinfo, nbdcopy (skipped when not installed).

use super::*;

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
