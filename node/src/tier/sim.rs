//! A simulated disk for crash tests: a [`Volume`] and an [`IoEngine`] over
//! in-memory files where writes land in a volatile page cache until
//! fdatasync, and new names are volatile until the directory is synced.
//! At a crash each unsynced 4 KiB page is kept, dropped or torn at 512-byte
//! sectors, and each unsynced name kept or dropped, by a seeded RNG.

use super::io::{FileHandle, FileKind, IoDone, IoEngine, IoOp, IoRequest, Volume, cancelled};
use crate::base::random::splitmix64;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;

const SECTOR: usize = 512;
const PAGE: usize = 4096;
/// Writes past this offset fail with EFBIG, like a real filesystem's limit.
const MAX_FILE: u64 = 1 << 40;

#[derive(Clone, Default)]
struct SimFile {
    /// What reads see: the durable bytes with the page cache on top.
    current: Vec<u8>,
    /// What survives a crash for sure.
    durable: Vec<u8>,
    /// Sectors written since the last sync.
    dirty: BTreeSet<usize>,
}

#[derive(Clone, Default)]
struct State {
    files: BTreeMap<u64, SimFile>,
    names: BTreeMap<String, u64>,
    /// Names whose creation is not yet durable.
    volatile_names: BTreeSet<String>,
    next_id: u64,
    rng: u64,
    /// Data ops (writes, syncs) left before the disk crashes by itself.
    ops_until_crash: Option<u64>,
    crashed: bool,
    /// The least time a sync takes.
    sync_delay: std::time::Duration,
    /// Bytes the files may hold in all (a full volume: writes that would
    /// grow past it fail with ENOSPC).
    capacity: Option<u64>,
}

impl State {
    fn rand(&mut self) -> u64 {
        self.rng = splitmix64(self.rng);
        self.rng
    }

    fn crash(&mut self) {
        if self.crashed {
            return;
        }
        self.crashed = true;
        let ids: Vec<u64> = self.files.keys().copied().collect();
        for id in ids {
            let mut f = std::mem::take(self.files.get_mut(&id).expect("listed"));
            let pages: BTreeSet<usize> = f.dirty.iter().map(|s| s * SECTOR / PAGE).collect();
            for page in pages {
                let fate = self.rand() % 3; // 0 kept, 1 dropped, 2 torn
                for sector in page * PAGE / SECTOR..(page + 1) * PAGE / SECTOR {
                    if !f.dirty.contains(&sector) || fate == 1 || (fate == 2 && self.rand() % 2 == 0) {
                        continue;
                    }
                    let (a, b) = (sector * SECTOR, ((sector + 1) * SECTOR).min(f.current.len()));
                    if f.durable.len() < b {
                        f.durable.resize(b, 0);
                    }
                    f.durable[a..b].copy_from_slice(&f.current[a..b]);
                }
            }
            f.dirty.clear();
            f.current = f.durable.clone();
            self.files.insert(id, f);
        }
        let volatile = std::mem::take(&mut self.volatile_names);
        for name in volatile {
            if self.rand() % 2 == 0 {
                if let Some(id) = self.names.remove(&name) {
                    self.files.remove(&id);
                }
            }
        }
    }

    /// Counts a data op; crashes the disk when its budget runs out.
    fn tick(&mut self) -> io::Result<()> {
        if let Some(left) = self.ops_until_crash.as_mut() {
            if *left == 0 {
                self.crash();
            } else {
                *left -= 1;
            }
        }
        if self.crashed {
            return Err(io::Error::other("simulated disk crashed"));
        }
        Ok(())
    }

    /// ENOSPC if file `id` cannot grow to `len` bytes within the capacity.
    fn room_for(&self, id: u64, len: usize) -> io::Result<()> {
        let Some(capacity) = self.capacity else { return Ok(()) };
        let used: usize = self.files.values().map(|f| f.current.len()).sum();
        let grows = len.saturating_sub(self.files.get(&id).map_or(0, |f| f.current.len()));
        if grows > 0 && (used + grows) as u64 > capacity {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }

    fn file(&mut self, id: u64) -> io::Result<&mut SimFile> {
        self.files.get_mut(&id).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "simulated file gone"))
    }

    fn execute(&mut self, id: u64, op: &mut IoOp) -> io::Result<usize> {
        // O_DIRECT's rule, enforced so that the simulation catches what a
        // real disk would refuse.
        if let IoOp::Read { offset, buf } | IoOp::Write { offset, buf } = op {
            if *offset % PAGE as u64 != 0 || buf.len() % PAGE != 0 {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
        }
        match op {
            IoOp::Read { offset, buf } => {
                if self.crashed {
                    return Err(io::Error::other("simulated disk crashed"));
                }
                let f = self.file(id)?;
                let start = (*offset as usize).min(f.current.len());
                let n = buf.len().min(f.current.len() - start);
                buf[..n].copy_from_slice(&f.current[start..start + n]);
                Ok(n)
            }
            IoOp::Write { offset, buf } => {
                self.tick()?;
                if *offset + buf.len() as u64 > MAX_FILE {
                    return Err(io::Error::from_raw_os_error(libc::EFBIG));
                }
                let (a, b) = (*offset as usize, *offset as usize + buf.len());
                self.room_for(id, b)?;
                let f = self.file(id)?;
                if f.current.len() < b {
                    f.current.resize(b, 0);
                }
                f.current[a..b].copy_from_slice(buf);
                f.dirty.extend(a / SECTOR..b.div_ceil(SECTOR));
                Ok(buf.len())
            }
            IoOp::Sync => {
                self.tick()?;
                let f = self.file(id)?;
                let len = f.current.len();
                f.durable.resize(len, 0);
                for s in std::mem::take(&mut f.dirty) {
                    let (a, b) = (s * SECTOR, ((s + 1) * SECTOR).min(len));
                    f.durable[a..b].copy_from_slice(&f.current[a..b]);
                }
                Ok(0)
            }
        }
    }
}

/// The disk: share it between a [`SimVolume`] and a [`SimEngine`].
#[derive(Clone)]
pub struct SimDisk {
    state: Arc<Mutex<State>>,
}

impl SimDisk {
    pub fn new(seed: u64) -> SimDisk {
        let state = State { rng: splitmix64(seed), next_id: 1, ..State::default() };
        SimDisk { state: Arc::new(Mutex::new(state)) }
    }

    /// Each sync takes at least `delay` from now on (a slow device).
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        self.state.lock().sync_delay = delay;
    }

    /// The files may hold `bytes` in all from now on (None: no limit):
    /// growing past it fails with ENOSPC, as a full filesystem.
    pub fn set_capacity(&self, bytes: Option<u64>) {
        self.state.lock().capacity = bytes;
    }

    /// The disk crashes by itself after `ops` more writes/syncs.
    pub fn crash_after(&self, ops: u64) {
        self.state.lock().ops_until_crash = Some(ops);
    }

    /// Crashes now (unsynced data kept, dropped or torn).
    pub fn crash(&self) {
        self.state.lock().crash();
    }

    /// Powers back on after a crash: what survived is what reads see.
    pub fn reboot(&self) {
        let mut s = self.state.lock();
        s.crash();
        s.crashed = false;
        s.ops_until_crash = None;
    }

    /// An independent copy of the disk as it is (with its page cache).
    pub fn fork(&self, seed: u64) -> SimDisk {
        let mut state = self.state.lock().clone();
        state.rng = splitmix64(seed);
        SimDisk { state: Arc::new(Mutex::new(state)) }
    }

    /// Overwrites bytes of a file's durable and current content directly
    /// (corruption, for fuzzing); extends the file if needed.
    pub fn scribble(&self, name: &str, offset: usize, bytes: &[u8]) {
        let mut s = self.state.lock();
        let Some(&id) = s.names.get(name) else { return };
        let f = s.files.get_mut(&id).expect("named file exists");
        for v in [&mut f.current, &mut f.durable] {
            if v.len() < offset + bytes.len() {
                v.resize(offset + bytes.len(), 0);
            }
            v[offset..offset + bytes.len()].copy_from_slice(bytes);
        }
    }

    /// File names and lengths.
    pub fn files(&self) -> Vec<(String, usize)> {
        let s = self.state.lock();
        s.names.iter().map(|(n, id)| (n.clone(), s.files[id].current.len())).collect()
    }

    pub fn volume(&self) -> SimVolume {
        SimVolume { disk: self.clone() }
    }

    /// An engine running ops in submission order on its own thread.
    pub fn engine(&self) -> SimEngine {
        let (tx, rx) = mpsc::channel::<Vec<IoRequest>>();
        let disk = self.clone();
        let thread = std::thread::spawn(move || {
            for batch in rx {
                let mut failed = false;
                for mut req in batch {
                    let FileKind::Sim(id) = *req.file.0 else {
                        unreachable!("a real file handed to the simulated engine")
                    };
                    if matches!(req.op, IoOp::Sync) {
                        // Outside the disk's lock: a slow device, not a stuck one.
                        let delay = disk.state.lock().sync_delay;
                        std::thread::sleep(delay);
                    }
                    let result = if matches!(req.op, IoOp::Sync) && failed {
                        Err(cancelled())
                    } else {
                        disk.state.lock().execute(id, &mut req.op)
                    };
                    failed |= result.is_err();
                    let buf = match req.op {
                        IoOp::Read { buf, .. } | IoOp::Write { buf, .. } => Some(buf),
                        IoOp::Sync => None,
                    };
                    (req.on_done)(IoDone { result, buf, started_ns: 0 });
                }
            }
        });
        SimEngine { tx: Some(tx), thread: Some(thread) }
    }
}

/// The simulated disk's directory.
pub struct SimVolume {
    disk: SimDisk,
}

impl Volume for SimVolume {
    fn list(&self) -> io::Result<Vec<String>> {
        Ok(self.disk.state.lock().names.keys().cloned().collect())
    }
    fn open(&self, name: &str) -> io::Result<FileHandle> {
        let s = self.disk.state.lock();
        let id = *s.names.get(name).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, name.to_string()))?;
        Ok(FileHandle(Arc::new(FileKind::Sim(id))))
    }
    fn create(&self, name: &str) -> io::Result<FileHandle> {
        let mut s = self.disk.state.lock();
        s.tick()?;
        if s.names.contains_key(name) {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, name.to_string()));
        }
        let id = s.next_id;
        s.next_id += 1;
        s.files.insert(id, SimFile::default());
        s.names.insert(name.to_string(), id);
        s.volatile_names.insert(name.to_string());
        Ok(FileHandle(Arc::new(FileKind::Sim(id))))
    }
    fn sync_dir(&self) -> io::Result<()> {
        let mut s = self.disk.state.lock();
        s.tick()?;
        s.volatile_names.clear();
        Ok(())
    }
    fn direct_io(&self) -> bool {
        true
    }
    fn len(&self, file: &FileHandle) -> io::Result<u64> {
        let FileKind::Sim(id) = *file.0 else { unreachable!("a real file handed to the simulated volume") };
        Ok(self.disk.state.lock().file(id)?.current.len() as u64)
    }
    fn allocate(&self, file: &FileHandle, len: u64) -> io::Result<()> {
        let FileKind::Sim(id) = *file.0 else { unreachable!("a real file handed to the simulated volume") };
        let mut s = self.disk.state.lock();
        s.tick()?;
        s.room_for(id, len as usize)?;
        let f = s.file(id)?;
        if (f.current.len() as u64) < len {
            // Allocated blocks read as zeros; their size is durable only at a sync.
            f.current.resize(len as usize, 0);
        }
        Ok(())
    }
    fn available(&self) -> Option<u64> {
        let s = self.disk.state.lock();
        let used: usize = s.files.values().map(|f| f.current.len()).sum();
        s.capacity.map(|c| c.saturating_sub(used as u64))
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        let mut s = self.disk.state.lock();
        s.tick()?;
        let id = s.names.remove(name).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, name.to_string()))?;
        s.files.remove(&id);
        s.volatile_names.remove(name);
        Ok(())
    }
}

/// The simulated disk's engine.
pub struct SimEngine {
    tx: Option<mpsc::Sender<Vec<IoRequest>>>,
    thread: Option<JoinHandle<()>>,
}

impl IoEngine for SimEngine {
    fn name(&self) -> &'static str {
        "sim"
    }
    fn submit(&self, batch: Vec<IoRequest>) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(batch);
        }
    }
}

impl Drop for SimEngine {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::io::{run_blocking, suite};
    use super::*;
    use crate::sys::file::AlignedBuf;

    #[test]
    fn the_simulated_engine_passes_the_engine_suite() {
        let disk = SimDisk::new(1);
        suite::run_all(&disk.engine(), &disk.volume());
    }

    fn write(engine: &SimEngine, f: &FileHandle, offset: u64, fill: u8, sync: bool) {
        let mut buf = AlignedBuf::zeroed(2 * PAGE);
        buf.fill(fill);
        let mut ops = vec![(f.clone(), IoOp::Write { offset, buf })];
        if sync {
            ops.push((f.clone(), IoOp::Sync));
        }
        for d in run_blocking(engine, ops) {
            d.result.unwrap();
        }
    }

    #[test]
    fn a_crash_keeps_synced_data_and_keeps_drops_or_tears_the_rest() {
        let (mut kept, mut dropped, mut torn) = (0, 0, 0);
        for seed in 0..64 {
            let disk = SimDisk::new(seed);
            let (vol, engine) = (disk.volume(), disk.engine());
            let f = vol.create("f").unwrap();
            vol.sync_dir().unwrap();
            write(&engine, &f, 0, 1, true);
            write(&engine, &f, 2 * PAGE as u64, 2, false);
            disk.crash();
            disk.reboot();
            let s = disk.state.lock();
            let content = &s.files[&1].current;
            assert!(content[..2 * PAGE].iter().all(|&b| b == 1), "synced data lost");
            for page in content[2 * PAGE..].chunks(PAGE) {
                let ones = page.chunks(SECTOR).filter(|s| s.iter().all(|&b| b == 2)).count();
                assert!(page.chunks(SECTOR).all(|s| s.iter().all(|&b| b == 2) || s.iter().all(|&b| b == 0)));
                match ones {
                    8 => kept += 1,
                    0 => dropped += 1,
                    _ => torn += 1,
                }
            }
            dropped += (4 * PAGE - content.len().max(2 * PAGE)) / PAGE;
        }
        assert!(kept > 0 && dropped > 0 && torn > 0, "{kept} {dropped} {torn}");
    }

    #[test]
    fn unaligned_io_is_refused_as_o_direct_would() {
        let disk = SimDisk::new(1);
        let f = disk.volume().create("f").unwrap();
        let engine = disk.engine();
        for op in [
            IoOp::Write { offset: 512, buf: AlignedBuf::zeroed(PAGE) },
            IoOp::Write { offset: 0, buf: AlignedBuf::zeroed(100) },
            IoOp::Read { offset: 0, buf: AlignedBuf::zeroed(PAGE + 512) },
        ] {
            let done = run_blocking(&engine, vec![(f.clone(), op)]);
            assert_eq!(done[0].result.as_ref().unwrap_err().raw_os_error(), Some(libc::EINVAL));
        }
    }

    #[test]
    fn unsynced_names_may_vanish_at_a_crash_synced_ones_never() {
        let mut vanished = 0;
        for seed in 0..32 {
            let disk = SimDisk::new(seed);
            let vol = disk.volume();
            vol.create("kept").unwrap();
            vol.sync_dir().unwrap();
            vol.create("maybe").unwrap();
            disk.crash();
            disk.reboot();
            let names = vol.list().unwrap();
            assert!(names.contains(&"kept".to_string()));
            vanished += usize::from(!names.contains(&"maybe".to_string()));
        }
        assert!(vanished > 0 && vanished < 32);
    }
}
