//! A FUSE file system that can lose power: one flat directory of files
//! kept in memory, where a write is only in a "page cache" until fsync
//! makes it durable, and a created, removed or renamed name only once the
//! directory is fsynced. [`PowerFs::power_cut`] drops everything not
//! durable, as a machine losing power would; the files then read back
//! what the last fsyncs covered.
//!
//! Every open file is served with `FOPEN_DIRECT_IO` and attributes are
//! never cached, so the kernel keeps nothing of its own: what the node
//! reads is what this file system holds.

use fuser::{
    FileAttr, FileType, Filesystem, MountOption, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyWrite, Request, TimeOrNow, consts::FOPEN_DIRECT_IO,
};
use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const ROOT: u64 = 1;
const NO_CACHE: Duration = Duration::ZERO;
/// The most a file may hold: a bound on what a runaway writer can take.
const MAX_FILE: u64 = 1 << 30;

#[derive(Default)]
struct File {
    current: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Default)]
struct State {
    files: HashMap<u64, File>,
    /// The directory as the running system sees it, and as it was at its
    /// last fsync.
    names: BTreeMap<String, u64>,
    durable_names: BTreeMap<String, u64>,
    next_ino: u64,
    /// Counters for the test's report.
    fsyncs: u64,
    cuts: u64,
}

/// The file system's state, shared by every mount of it.
#[derive(Clone, Default)]
pub struct PowerFs {
    state: Arc<Mutex<State>>,
}

/// A mounted [`PowerFs`]; unmounted when dropped.
pub struct Mounted {
    _session: fuser::BackgroundSession,
}

impl PowerFs {
    pub fn new() -> PowerFs {
        let fs = PowerFs::default();
        fs.state.lock().unwrap().next_ino = ROOT + 1;
        fs
    }

    /// Mounts it at `at` (an existing empty directory), served by a
    /// background thread.
    pub fn mount(&self, at: &Path) -> std::io::Result<Mounted> {
        let options = [MountOption::FSName("strata-powerfs".into()), MountOption::RW];
        let session = fuser::spawn_mount2(Handler { fs: self.clone() }, at, &options)?;
        Ok(Mounted { _session: session })
    }

    /// Power is lost: every file goes back to its last fsynced content and
    /// the directory to its last fsynced names.
    pub fn power_cut(&self) {
        let mut st = self.state.lock().unwrap();
        st.names = st.durable_names.clone();
        let live: Vec<u64> = st.names.values().copied().collect();
        st.files.retain(|ino, _| live.contains(ino));
        for f in st.files.values_mut() {
            f.current = f.durable.clone();
        }
        st.cuts += 1;
    }

    /// (fsyncs, power cuts) so far.
    pub fn counters(&self) -> (u64, u64) {
        let st = self.state.lock().unwrap();
        (st.fsyncs, st.cuts)
    }
}

struct Handler {
    fs: PowerFs,
}

fn attr(ino: u64, size: u64, kind: FileType) -> FileAttr {
    let now = SystemTime::now();
    FileAttr {
        ino,
        size,
        blocks: size.div_ceil(512),
        atime: now,
        mtime: now,
        ctime: now,
        crtime: now,
        kind,
        perm: if kind == FileType::Directory { 0o755 } else { 0o644 },
        nlink: if kind == FileType::Directory { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl Handler {
    fn file_attr(&self, ino: u64) -> Option<FileAttr> {
        if ino == ROOT {
            return Some(attr(ROOT, 0, FileType::Directory));
        }
        let st = self.fs.state.lock().unwrap();
        st.files.get(&ino).map(|f| attr(ino, f.current.len() as u64, FileType::RegularFile))
    }

    fn create_file(&self, parent: u64, name: &OsStr) -> Result<FileAttr, i32> {
        if parent != ROOT {
            return Err(libc::ENOENT);
        }
        let name = name.to_str().ok_or(libc::EINVAL)?.to_string();
        let mut st = self.fs.state.lock().unwrap();
        if st.names.contains_key(&name) {
            return Err(libc::EEXIST);
        }
        let ino = st.next_ino;
        st.next_ino += 1;
        st.files.insert(ino, File::default());
        st.names.insert(name, ino);
        Ok(attr(ino, 0, FileType::RegularFile))
    }
}

impl Filesystem for Handler {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let ino = (parent == ROOT)
            .then(|| self.fs.state.lock().unwrap().names.get(name.to_str().unwrap_or("")).copied())
            .flatten();
        match ino.and_then(|ino| self.file_attr(ino)) {
            Some(a) => reply.entry(&NO_CACHE, &a, 0),
            None => reply.error(libc::ENOENT),
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match self.file_attr(ino) {
            Some(a) => reply.attr(&NO_CACHE, &a),
            None => reply.error(libc::ENOENT),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        if let Some(size) = size {
            if size > MAX_FILE {
                return reply.error(libc::EFBIG);
            }
            let mut st = self.fs.state.lock().unwrap();
            match st.files.get_mut(&ino) {
                Some(f) => f.current.resize(size as usize, 0),
                None => return reply.error(libc::ENOENT),
            }
        }
        match self.file_attr(ino) {
            Some(a) => reply.attr(&NO_CACHE, &a),
            None => reply.error(libc::ENOENT),
        }
    }

    fn mknod(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        match self.create_file(parent, name) {
            Ok(a) => reply.entry(&NO_CACHE, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.create_file(parent, name) {
            Ok(a) => reply.created(&NO_CACHE, &a, 0, 0, FOPEN_DIRECT_IO),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let mut st = self.fs.state.lock().unwrap();
        match (parent == ROOT).then(|| st.names.remove(name.to_str().unwrap_or(""))).flatten() {
            Some(ino) => {
                // The data stays while the durable directory still names it.
                if !st.durable_names.values().any(|&i| i == ino) {
                    st.files.remove(&ino);
                }
                reply.ok()
            }
            None => reply.error(libc::ENOENT),
        }
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        _flags: u32,
        reply: ReplyEmpty,
    ) {
        let (Some(from), Some(to)) = (name.to_str(), newname.to_str()) else { return reply.error(libc::EINVAL) };
        if parent != ROOT || newparent != ROOT {
            return reply.error(libc::ENOENT);
        }
        let mut st = self.fs.state.lock().unwrap();
        match st.names.remove(from) {
            Some(ino) => {
                st.names.insert(to.to_string(), ino);
                reply.ok()
            }
            None => reply.error(libc::ENOENT),
        }
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        match self.file_attr(ino) {
            Some(_) => reply.opened(0, FOPEN_DIRECT_IO),
            None => reply.error(libc::ENOENT),
        }
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let st = self.fs.state.lock().unwrap();
        let Some(f) = st.files.get(&ino) else { return reply.error(libc::ENOENT) };
        let start = (offset.max(0) as usize).min(f.current.len());
        let end = (start + size as usize).min(f.current.len());
        reply.data(&f.current[start..end]);
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let end = offset.max(0) as u64 + data.len() as u64;
        if offset < 0 || end > MAX_FILE {
            return reply.error(libc::EFBIG);
        }
        let mut st = self.fs.state.lock().unwrap();
        let Some(f) = st.files.get_mut(&ino) else { return reply.error(libc::ENOENT) };
        let (a, b) = (offset as usize, end as usize);
        if f.current.len() < b {
            f.current.resize(b, 0);
        }
        f.current[a..b].copy_from_slice(data);
        reply.written(data.len() as u32);
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock_owner: u64, reply: ReplyEmpty) {
        reply.ok(); // close(2) is no fsync
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, _datasync: bool, reply: ReplyEmpty) {
        let mut st = self.fs.state.lock().unwrap();
        st.fsyncs += 1;
        match st.files.get_mut(&ino) {
            Some(f) => {
                f.durable = f.current.clone();
                reply.ok()
            }
            None => reply.error(libc::ENOENT),
        }
    }

    fn opendir(&mut self, _req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        if ino == ROOT { reply.opened(0, 0) } else { reply.error(libc::ENOTDIR) }
    }

    fn readdir(&mut self, _req: &Request<'_>, ino: u64, _fh: u64, offset: i64, mut reply: ReplyDirectory) {
        if ino != ROOT {
            return reply.error(libc::ENOTDIR);
        }
        let st = self.fs.state.lock().unwrap();
        let mut entries = vec![(ROOT, FileType::Directory, ".".to_string()), (ROOT, FileType::Directory, "..".into())];
        entries.extend(st.names.iter().map(|(n, &i)| (i, FileType::RegularFile, n.clone())));
        for (i, (ino, kind, name)) in entries.into_iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(ino, i as i64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _flags: i32, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsyncdir(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _datasync: bool, reply: ReplyEmpty) {
        let mut st = self.fs.state.lock().unwrap();
        st.fsyncs += 1;
        st.durable_names = st.names.clone();
        // Files no name refers to any more are gone for good.
        let live: Vec<u64> = st.names.values().copied().collect();
        st.files.retain(|ino, _| live.contains(ino));
        reply.ok();
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: fuser::ReplyStatfs) {
        let blocks = 4 * MAX_FILE / 4096;
        reply.statfs(blocks, blocks, blocks, 1 << 20, 1 << 20, 4096, 255, 4096);
    }

    fn access(&mut self, _req: &Request<'_>, _ino: u64, _mask: i32, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(libc::EOPNOTSUPP);
        }
        let end = offset.max(0) as u64 + length.max(0) as u64;
        if end > MAX_FILE {
            return reply.error(libc::EFBIG);
        }
        let mut st = self.fs.state.lock().unwrap();
        match st.files.get_mut(&ino) {
            Some(f) => {
                if (f.current.len() as u64) < end {
                    f.current.resize(end as usize, 0);
                }
                reply.ok()
            }
            None => reply.error(libc::ENOENT),
        }
    }
}
