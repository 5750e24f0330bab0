//! Exhaustive checks of the small critical sections: every interleaving (shuttle's DFS
//! scheduler) of a few threads through the group commit and the flush generation, each
//! with a "sync" that snapshots what was staged, lets others run, then makes it durable.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex as StdMutex;

use raidlab_store::sync::{thread, Arc};
use raidlab_store::wb::commit::{FlushGen, GroupCommit};

/// What the threads staged and what a sync made durable.
#[derive(Default)]
struct Disk {
    staged: StdMutex<Vec<bool>>,
    durable: StdMutex<Vec<bool>>,
}

impl Disk {
    fn new(n: usize) -> Disk {
        Disk {
            staged: StdMutex::new(vec![false; n]),
            durable: StdMutex::new(vec![false; n]),
        }
    }
    /// A sync: what is staged when it begins is durable when it ends; others run between.
    fn sync(&self) -> std::io::Result<()> {
        let snap = self.staged.lock().expect("staged").clone();
        thread::yield_now();
        let mut d = self.durable.lock().expect("durable");
        for (i, s) in snap.iter().enumerate() {
            d[i] |= *s;
        }
        Ok(())
    }
}

/// Run two threads of `step(disk, kernel, i)` over one fresh disk and kernel per execution,
/// under shuttle's exhaustive scheduler; each thread then checks its record is durable.
/// Returns the interleavings explored.
fn every_interleaving<K: Default + Send + Sync + 'static>(
    what: &'static str,
    step: fn(&Disk, &K, usize),
) -> u64 {
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    shuttle::check_dfs(
        move || {
            c.fetch_add(1, Ordering::SeqCst);
            let disk = Arc::new(Disk::new(2));
            let kernel = Arc::new(K::default());
            let hs: Vec<_> = (0..2)
                .map(|i| {
                    let (disk, kernel) = (disk.clone(), kernel.clone());
                    thread::spawn(move || {
                        disk.staged.lock().expect("staged")[i] = true;
                        step(&disk, &kernel, i);
                        assert!(
                            disk.durable.lock().expect("durable")[i],
                            "{what}: thread {i} returned before its record was durable"
                        );
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("thread");
            }
        },
        None,
    );
    count.load(Ordering::SeqCst)
}

/// Every committer returns only once a sync that began after its record was staged has
/// finished (its record is durable), in every interleaving of two committers.
#[test]
fn group_commit_covers_every_staged_record() {
    let explored = every_interleaving::<GroupCommit>("group commit", |disk, gc, _| {
        gc.commit(&|| disk.sync()).expect("commit");
    });
    println!("KERNEL group commit: {explored} interleavings of 2 committers, all checked");
    assert!(explored > 100, "{explored}");
}

/// Every FLUSH returns only once the writes completed before it are durable, in every
/// interleaving of two writer-flushers (the smallest history that broke the old flag: one
/// FLUSH's sync in progress while the other's returns).
#[test]
fn flush_generation_covers_every_completed_write() {
    let explored = every_interleaving::<FlushGen>("flush generation", |disk, gen, _| {
        gen.wrote();
        gen.flush(|| disk.sync()).expect("flush");
    });
    println!("KERNEL flush generation: {explored} interleavings, all checked");
    assert!(explored > 100, "{explored}");
}
