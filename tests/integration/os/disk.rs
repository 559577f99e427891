//! The simulated disk (src/os/disk.rs) against its model: random operation sequences
//! checked after every step against a reference model built on whole-file copies, plus one
//! test per durability rule a broker relies on.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use hightide::os::clock::{self, SimTime};
use hightide::os::disk::{
    Disk, DiskConfig, DiskError, DiskFault, Filesystem, PowerLossModel, PAGE_BYTES, SECTOR_BYTES,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const PAGE: usize = PAGE_BYTES as usize;
const SECTOR: usize = SECTOR_BYTES as usize;
const FILES: [&str; 5] = ["f", "g", "a/f", "a/g", "b/h"];
const DIRS: [&str; 3] = ["", "a", "b"];
const MODELS: [PowerLossModel; 3] = [
    PowerLossModel::DropUnflushed,
    PowerLossModel::RandomWriteback,
    PowerLossModel::TornTail,
];

/// The filesystem that names a file only through an fsync, where the power-loss models
/// apply.
fn config(power_loss: PowerLossModel) -> DiskConfig {
    DiskConfig {
        power_loss,
        filesystem: Filesystem::NoMetadataWriteback,
        ..DiskConfig::default()
    }
}

/// ext4 with its defaults.
fn ext4() -> DiskConfig {
    DiskConfig::default()
}

fn at(seconds: u64) -> SimTime {
    let now = SimTime::after_start(Duration::from_secs(seconds));
    clock::set(now);
    now
}

fn not_found(path: &str) -> DiskError {
    DiskError::NotFound(path.to_string())
}

/// Copy the first `limit` bytes of `page` of `cached` over `image`, extending it: what the
/// disk does when it writes a page back.
fn overlay_page(image: &mut Vec<u8>, cached: &[u8], page: u64, limit: usize) {
    let start = page as usize * PAGE;
    let end = (start + limit.min(PAGE)).min(cached.len());
    if end <= start {
        return;
    }
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(&cached[start..end]);
}

/// Where two images differ, in a line short enough for a proptest failure.
fn difference(expected: &[u8], actual: &[u8]) -> String {
    match expected.iter().zip(actual).position(|(a, b)| a != b) {
        Some(at) => format!(
            "expected {} bytes, got {}; first difference at byte {at}",
            expected.len(),
            actual.len()
        ),
        None => format!(
            "expected {} bytes, got {}; the shorter is a prefix of the longer",
            expected.len(),
            actual.len()
        ),
    }
}

/// Whether `after` (a file after a power loss) is its `durable` image overlaid with dirty
/// pages of `cached` as the power-loss model allows.
fn explain_power_loss(
    model: PowerLossModel,
    durable: &[u8],
    cached: &[u8],
    dirty: &[u64],
    after: &[u8],
) -> Result<(), String> {
    match model {
        PowerLossModel::DropUnflushed => {
            if after == durable {
                return Ok(());
            }
        }
        PowerLossModel::RandomWriteback => {
            // Every dirty page whose cached bytes show in `after` may have been written back;
            // overlaying all of them must give `after` exactly.
            let mut image = durable.to_vec();
            for &page in dirty {
                let start = page as usize * PAGE;
                let end = (start + PAGE).min(cached.len());
                if end > start && end <= after.len() && after[start..end] == cached[start..end] {
                    overlay_page(&mut image, cached, page, PAGE);
                }
            }
            if image == after {
                return Ok(());
            }
        }
        PowerLossModel::TornTail => {
            let Some(&last) = dirty.last() else {
                return if after == durable {
                    Ok(())
                } else {
                    Err(format!("no dirty page: {}", difference(durable, after)))
                };
            };
            for sectors in 0..=PAGE / SECTOR {
                let mut image = durable.to_vec();
                overlay_page(&mut image, cached, last, sectors * SECTOR);
                if image == after {
                    return Ok(());
                }
            }
        }
    }
    Err(format!(
        "{model:?}: not the durable image plus allowed dirty pages {dirty:?}: \
         vs durable {}; vs cached {}",
        difference(durable, after),
        difference(cached, after)
    ))
}

/// Every file of the disk's cached namespace, found through `list` and `list_dirs`.
fn all_files(disk: &Disk) -> BTreeSet<String> {
    fn walk(disk: &Disk, dir: &str, out: &mut BTreeSet<String>) {
        let subdirs: BTreeSet<String> = disk.list_dirs(dir).into_iter().collect();
        for name in disk.list(dir) {
            let path = if dir.is_empty() {
                name.clone()
            } else {
                format!("{dir}/{name}")
            };
            if subdirs.contains(&name) {
                walk(disk, &path, out);
            } else {
                out.insert(path);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(disk, "", &mut out);
    out
}

#[derive(Clone, Debug)]
enum Op {
    Write {
        file: usize,
        offset: u64,
        len: usize,
    },
    Append {
        file: usize,
        len: usize,
    },
    SetLen {
        file: usize,
        len: u64,
    },
    Create {
        file: usize,
    },
    Rename {
        from: usize,
        to: usize,
    },
    Delete {
        file: usize,
    },
    DeleteDir {
        dir: usize,
    },
    Fsync {
        file: usize,
    },
    FsyncDir {
        dir: usize,
    },
    Advance {
        ms: u64,
    },
    FsyncError,
    Full,
    Heal,
    PowerLoss,
}

fn op() -> impl Strategy<Value = Op> {
    let file = || 0..FILES.len();
    let dir = || 0..DIRS.len();
    prop_oneof![
        4 => (file(), 0..14_000u64, 0..6_000usize)
            .prop_map(|(file, offset, len)| Op::Write { file, offset, len }),
        6 => (file(), 0..6_000usize).prop_map(|(file, len)| Op::Append { file, len }),
        2 => (file(), 0..20_000u64).prop_map(|(file, len)| Op::SetLen { file, len }),
        2 => file().prop_map(|file| Op::Create { file }),
        2 => (file(), file()).prop_map(|(from, to)| Op::Rename { from, to }),
        1 => file().prop_map(|file| Op::Delete { file }),
        1 => dir().prop_map(|dir| Op::DeleteDir { dir }),
        3 => file().prop_map(|file| Op::Fsync { file }),
        3 => dir().prop_map(|dir| Op::FsyncDir { dir }),
        4 => (0..12_000u64).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::FsyncError),
        1 => Just(Op::Full),
        1 => Just(Op::Heal),
        2 => Just(Op::PowerLoss),
    ]
}

/// One file of the reference model: whole images, copied freely.
#[derive(Default)]
struct ModelFile {
    cached: Vec<u8>,
    durable: Vec<u8>,
    /// ext4: the image the journal's next commit makes durable.
    next: Option<Vec<u8>>,
    dirty: BTreeMap<u64, SimTime>,
    /// Pages a failed fsync marked clean without writing them.
    lost: BTreeSet<u64>,
}

impl ModelFile {
    fn dirty_range(&mut self, start: usize, end: usize, now: SimTime) {
        if end <= start {
            return;
        }
        for page in (start / PAGE) as u64..=((end - 1) / PAGE) as u64 {
            self.dirty.entry(page).or_insert(now);
            self.lost.remove(&page);
        }
    }

    /// What write-back and fsync change: the journal's image if it has one.
    fn medium(&mut self) -> &mut Vec<u8> {
        self.next.as_mut().unwrap_or(&mut self.durable)
    }

    /// Zeros past the old end differ from the medium wherever it still holds bytes.
    fn extend(&mut self, len: usize, now: SimTime) {
        let old = self.cached.len();
        if len > old {
            let medium = self.medium().len();
            self.dirty_range(old, len.min(medium), now);
            self.cached.resize(len, 0);
        }
    }

    fn set_len(&mut self, len: usize, now: SimTime) {
        if len < self.cached.len() {
            self.cached.truncate(len);
            self.dirty.retain(|&page, _| (page as usize) * PAGE < len);
            self.lost.retain(|&page| (page as usize) * PAGE < len);
        } else {
            self.extend(len, now);
        }
    }

    fn write(&mut self, offset: usize, data: &[u8], now: SimTime) {
        if data.is_empty() {
            return;
        }
        self.extend(offset, now);
        let end = offset + data.len();
        if self.cached.len() < end {
            self.cached.resize(end, 0);
        }
        self.cached[offset..end].copy_from_slice(data);
        self.dirty_range(offset, end, now);
    }

    /// The file becomes its cached image on the medium, except pages a failed fsync lost.
    fn sync(&mut self) {
        let mut image = self.cached.clone();
        let medium = self.next.as_ref().unwrap_or(&self.durable);
        for &page in &self.lost {
            let start = page as usize * PAGE;
            let end = (start + PAGE).min(image.len());
            for (at, byte) in image.iter_mut().enumerate().take(end).skip(start) {
                *byte = medium.get(at).copied().unwrap_or(0);
            }
        }
        *self.medium() = image;
        self.dirty.clear();
    }

    /// Write every dirty page to the medium.
    fn write_back_all(&mut self) {
        let pages: Vec<u64> = self.dirty.keys().copied().collect();
        let cached = self.cached.clone();
        for page in pages {
            overlay_page(self.medium(), &cached, page, PAGE);
        }
        self.dirty.clear();
    }
}

struct Model {
    config: DiskConfig,
    files: BTreeMap<u64, ModelFile>,
    next_id: u64,
    names: BTreeMap<String, u64>,
    durable_names: BTreeMap<String, u64>,
    /// Paths whose content was fsynced and not touched since: must survive any power loss.
    synced: BTreeMap<String, Vec<u8>>,
    fsync_error: bool,
    full: bool,
    next_writeback: SimTime,
    /// ext4's running transaction: changed paths, files with a `next` image, when it commits.
    journal_names: BTreeSet<String>,
    journal_files: BTreeSet<u64>,
    commit_at: Option<SimTime>,
}

fn prefix(dir: &str) -> String {
    if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    }
}

impl Model {
    fn new(config: DiskConfig) -> Model {
        Model {
            next_writeback: SimTime::after_start(config.writeback),
            config,
            files: BTreeMap::new(),
            next_id: 0,
            names: BTreeMap::new(),
            durable_names: BTreeMap::new(),
            synced: BTreeMap::new(),
            fsync_error: false,
            full: false,
            journal_names: BTreeSet::new(),
            journal_files: BTreeSet::new(),
            commit_at: None,
        }
    }

    fn ext4(&self) -> bool {
        self.config.filesystem == Filesystem::Ext4Ordered
    }

    fn arm(&mut self, now: SimTime) {
        if self.ext4() && self.commit_at.is_none() {
            self.commit_at = Some(now + self.config.journal_commit);
        }
    }

    fn name_changed(&mut self, path: &str, now: SimTime) {
        if self.ext4() {
            self.journal_names.insert(path.to_string());
            self.arm(now);
        }
    }

    /// ext4: the file's image on the medium changes in the running transaction.
    fn stage(&mut self, id: u64, now: SimTime) {
        if self.ext4() {
            let file = self.files.get_mut(&id).unwrap();
            if file.next.is_none() {
                file.next = Some(file.durable.clone());
            }
            self.journal_files.insert(id);
            self.arm(now);
        }
    }

    fn commit(&mut self) {
        for id in std::mem::take(&mut self.journal_files) {
            let file = self.files.get_mut(&id).unwrap();
            if let Some(next) = file.next.take() {
                file.durable = next;
            }
        }
        for path in std::mem::take(&mut self.journal_names) {
            match self.names.get(&path) {
                Some(&id) => self.link_durable(id, &path),
                None => {
                    self.durable_names.remove(&path);
                }
            }
        }
        self.commit_at = None;
    }

    fn open(&mut self, path: &str, now: SimTime) -> &mut ModelFile {
        let id = match self.names.get(path) {
            Some(&id) => id,
            None => {
                let id = self.next_id;
                self.next_id += 1;
                self.files.insert(id, ModelFile::default());
                self.names.insert(path.to_string(), id);
                self.name_changed(path, now);
                id
            }
        };
        self.files.get_mut(&id).unwrap()
    }

    fn space(&self, path: &str) -> Result<(), DiskError> {
        if self.full {
            Err(DiskError::NoSpace(path.to_string()))
        } else {
            Ok(())
        }
    }

    fn write(
        &mut self,
        path: &str,
        offset: usize,
        data: &[u8],
        now: SimTime,
    ) -> Result<(), DiskError> {
        self.space(path)?;
        self.synced.remove(path);
        self.open(path, now).write(offset, data, now);
        self.arm(now);
        Ok(())
    }

    fn append(&mut self, path: &str, data: &[u8], now: SimTime) -> Result<u64, DiskError> {
        self.space(path)?;
        self.synced.remove(path);
        let file = self.open(path, now);
        let position = file.cached.len();
        file.write(position, data, now);
        self.arm(now);
        Ok(position as u64)
    }

    fn create(&mut self, path: &str, now: SimTime) -> Result<(), DiskError> {
        self.space(path)?;
        self.open(path, now);
        self.set_len(path, 0, now)
    }

    /// ext4 journals a new size at once.
    fn set_len(&mut self, path: &str, len: usize, now: SimTime) -> Result<(), DiskError> {
        let id = *self.names.get(path).ok_or_else(|| not_found(path))?;
        self.synced.remove(path);
        self.stage(id, now);
        let file = self.files.get_mut(&id).unwrap();
        file.set_len(len, now);
        if let Some(next) = &mut file.next {
            next.resize(len, 0);
        }
        Ok(())
    }

    fn unlink(&mut self, path: &str, now: SimTime) -> Option<u64> {
        let id = self.names.remove(path)?;
        self.name_changed(path, now);
        self.synced.remove(path);
        self.files.get_mut(&id).unwrap().dirty.clear();
        Some(id)
    }

    /// ext4 writes a file renamed over another before the commit (`auto_da_alloc`).
    fn rename(&mut self, from: &str, to: &str, now: SimTime) -> Result<(), DiskError> {
        let id = *self.names.get(from).ok_or_else(|| not_found(from))?;
        if from != to {
            if self.unlink(to, now).is_some() && self.ext4() {
                self.stage(id, now);
                self.files.get_mut(&id).unwrap().write_back_all();
            }
            self.names.remove(from);
            self.synced.remove(from);
            self.names.insert(to.to_string(), id);
            self.name_changed(from, now);
            self.name_changed(to, now);
        }
        Ok(())
    }

    fn delete_dir(&mut self, dir: &str, now: SimTime) -> Result<(), DiskError> {
        let prefix = prefix(dir);
        let paths: Vec<String> = self
            .names
            .keys()
            .filter(|path| path.starts_with(&prefix))
            .cloned()
            .collect();
        if paths.is_empty() {
            return Err(not_found(dir));
        }
        for path in paths {
            self.unlink(&path, now);
        }
        Ok(())
    }

    fn link_durable(&mut self, id: u64, path: &str) {
        self.durable_names.retain(|_, other| *other != id);
        self.durable_names.insert(path.to_string(), id);
    }

    /// ext4 commits the transaction if it holds a change of the file (its pages to write
    /// are one).
    fn fsync(&mut self, path: &str, now: SimTime) -> Result<(), DiskError> {
        let id = *self.names.get(path).ok_or_else(|| not_found(path))?;
        let file = self.files.get_mut(&id).unwrap();
        if std::mem::take(&mut self.fsync_error) {
            let dropped: Vec<u64> = file.dirty.keys().copied().collect();
            file.lost.extend(dropped);
            file.dirty.clear();
            self.synced.remove(path);
            return Err(DiskError::Io(path.to_string()));
        }
        if self.config.filesystem == Filesystem::Ext4Ordered {
            let touched =
                !file.dirty.is_empty() || file.next.is_some() || self.journal_names.contains(path);
            if touched {
                self.stage(id, now);
                self.files.get_mut(&id).unwrap().sync();
                self.commit();
            }
            let file = &self.files[&id];
            if file.lost.is_empty() {
                self.synced.insert(path.to_string(), file.cached.clone());
            } else {
                self.synced.remove(path);
            }
            return Ok(());
        }
        file.sync();
        if file.lost.is_empty() {
            self.synced.insert(path.to_string(), file.cached.clone());
        } else {
            self.synced.remove(path);
        }
        self.link_durable(id, path);
        Ok(())
    }

    fn fsync_dir(&mut self, dir: &str) -> Result<(), DiskError> {
        if std::mem::take(&mut self.fsync_error) {
            return Err(DiskError::Io(dir.to_string()));
        }
        let prefix = prefix(dir);
        if self.ext4() {
            if self
                .journal_names
                .iter()
                .any(|path| path.starts_with(&prefix))
            {
                self.commit();
            }
            return Ok(());
        }
        let names = &self.names;
        self.durable_names.retain(|path, id| {
            let Some(rest) = path.strip_prefix(&prefix) else {
                return true;
            };
            match rest.split_once('/') {
                None => names.get(path) == Some(id),
                Some((subdir, _)) => {
                    let sub = format!("{prefix}{subdir}/");
                    names.keys().any(|name| name.starts_with(&sub))
                }
            }
        });
        let children: Vec<(String, u64)> = self
            .names
            .iter()
            .filter(|(path, _)| {
                path.strip_prefix(&prefix)
                    .is_some_and(|rest| !rest.contains('/'))
            })
            .map(|(path, &id)| (path.clone(), id))
            .collect();
        for (path, id) in children {
            self.link_durable(id, &path);
        }
        Ok(())
    }

    /// The flusher, then ext4's commit if its time has come.
    fn writeback(&mut self, now: SimTime) {
        if now >= self.next_writeback {
            self.next_writeback = now + self.config.writeback;
            let ids: Vec<u64> = self.files.keys().copied().collect();
            for id in ids {
                let expired: Vec<u64> = self.files[&id]
                    .dirty
                    .iter()
                    .filter(|(_, &since)| now - since >= self.config.dirty_expire)
                    .map(|(&page, _)| page)
                    .collect();
                if expired.is_empty() {
                    continue;
                }
                self.stage(id, now);
                let file = self.files.get_mut(&id).unwrap();
                let cached = file.cached.clone();
                for page in expired {
                    overlay_page(file.medium(), &cached, page, PAGE);
                    file.dirty.remove(&page);
                }
            }
        }
        if self.commit_at.is_some_and(|at| now >= at) {
            self.commit();
        }
    }

    /// Check what the disk left after a power loss, then adopt it (the choice was seeded).
    /// ext4 keeps only what a commit named, whatever the power-loss model.
    fn power_loss(&mut self, disk: &Disk) -> Result<(), String> {
        let model = if self.ext4() {
            PowerLossModel::DropUnflushed
        } else {
            self.config.power_loss
        };
        for (path, id) in &self.durable_names {
            let file = self.files.get_mut(id).unwrap();
            let after = disk
                .read_all(path)
                .map_err(|e| format!("{path} durable but gone after power loss: {e}"))?;
            let dirty: Vec<u64> = file.dirty.keys().copied().collect();
            explain_power_loss(model, &file.durable, &file.cached, &dirty, &after)
                .map_err(|e| format!("{path}: {e}"))?;
            file.durable = after.clone();
            file.cached = after;
            file.next = None;
            file.dirty.clear();
            file.lost.clear();
        }
        self.journal_names.clear();
        self.journal_files.clear();
        self.commit_at = None;
        for (path, content) in &self.synced {
            let after = disk
                .read_all(path)
                .map_err(|e| format!("fsynced {path} lost: {e}"))?;
            if &after != content {
                return Err(format!(
                    "fsynced {path} changed: {}",
                    difference(content, &after)
                ));
            }
        }
        let live: BTreeSet<u64> = self.durable_names.values().copied().collect();
        self.files.retain(|id, _| live.contains(id));
        self.names = self.durable_names.clone();
        Ok(())
    }

    /// The disk shows exactly the model: namespace, contents, dirty pages, durable images.
    fn check(&self, disk: &Disk) -> Result<(), String> {
        let files = all_files(disk);
        let expected: BTreeSet<String> = self.names.keys().cloned().collect();
        if files != expected {
            return Err(format!("files {files:?}, model {expected:?}"));
        }
        for (path, id) in &self.names {
            let file = &self.files[id];
            let content = disk.read_all(path).map_err(|e| e.to_string())?;
            if content != file.cached {
                return Err(format!(
                    "{path} reads wrong: {}",
                    difference(&file.cached, &content)
                ));
            }
            let dirty: Vec<u64> = file.dirty.keys().copied().collect();
            if disk.dirty_pages(path) != dirty {
                return Err(format!(
                    "{path} dirty {:?}, model {dirty:?}",
                    disk.dirty_pages(path)
                ));
            }
        }
        for path in FILES {
            let expected = self
                .durable_names
                .get(path)
                .map(|id| &self.files[id].durable);
            let durable = disk.durable(path);
            if durable.as_ref() != expected {
                return Err(format!(
                    "{path} durable {:?} bytes, model {:?} bytes ({})",
                    durable.as_ref().map(Vec::len),
                    expected.map(Vec::len),
                    match (expected, &durable) {
                        (Some(e), Some(d)) => difference(e, d),
                        _ => "presence differs".to_string(),
                    }
                ));
            }
        }
        Ok(())
    }
}

fn run_against_model(config: DiskConfig, seed: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    clock::set(SimTime::ZERO);
    let disk = Disk::new(config.clone(), seed);
    let mut model = Model::new(config);
    let mut now = SimTime::ZERO;
    for (i, op) in ops.iter().enumerate() {
        let tag = (i % 255 + 1) as u8;
        let step = match op.clone() {
            Op::Write { file, offset, len } => {
                let data = vec![tag; len];
                let expected = model.write(FILES[file], offset as usize, &data, now);
                compare(disk.write(FILES[file], offset, &data), expected)
            }
            Op::Append { file, len } => {
                let data = vec![tag; len];
                let expected = model.append(FILES[file], &data, now);
                compare(disk.append(FILES[file], &data), expected)
            }
            Op::SetLen { file, len } => {
                let expected = model.set_len(FILES[file], len as usize, now);
                compare(disk.set_len(FILES[file], len), expected)
            }
            Op::Create { file } => {
                compare(disk.create(FILES[file]), model.create(FILES[file], now))
            }
            Op::Rename { from, to } => compare(
                disk.rename(FILES[from], FILES[to]),
                model.rename(FILES[from], FILES[to], now),
            ),
            Op::Delete { file } => compare(
                disk.delete(FILES[file]),
                model
                    .unlink(FILES[file], now)
                    .map(|_| ())
                    .ok_or_else(|| not_found(FILES[file])),
            ),
            Op::DeleteDir { dir } => {
                compare(disk.delete_dir(DIRS[dir]), model.delete_dir(DIRS[dir], now))
            }
            Op::Fsync { file } => {
                compare(disk.fsync_now(FILES[file]), model.fsync(FILES[file], now))
            }
            Op::FsyncDir { dir } => {
                compare(disk.fsync_dir_now(DIRS[dir]), model.fsync_dir(DIRS[dir]))
            }
            Op::Advance { ms } => {
                now += Duration::from_millis(ms);
                clock::set(now);
                disk.writeback(now);
                model.writeback(now);
                Ok(())
            }
            Op::FsyncError => {
                model.fsync_error = true;
                compare(disk.inject(DiskFault::FsyncError), Ok(()))
            }
            Op::Full => {
                model.full = true;
                compare(disk.inject(DiskFault::Full), Ok(()))
            }
            Op::Heal => {
                model.full = false;
                model.fsync_error = false;
                compare(disk.inject(DiskFault::Heal), Ok(()))
            }
            Op::PowerLoss => {
                let cached_before = all_files(&disk);
                disk.power_loss();
                model
                    .power_loss(&disk)
                    .map_err(|e| format!("{e} (cached before: {cached_before:?})"))
            }
        };
        step.and_then(|()| model.check(&disk))
            .map_err(|e| TestCaseError::fail(format!("after op {i} {op:?}: {e}")))?;
    }
    Ok(())
}

fn compare<T: PartialEq + std::fmt::Debug>(
    actual: Result<T, DiskError>,
    expected: Result<T, DiskError>,
) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("disk returned {actual:?}, model {expected:?}"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The whole model: page cache, fsync (file and dir), flusher, ext4's journal, fsync
    /// errors, disk full, and power loss under each model — checked after every operation.
    #[test]
    fn disk_matches_its_model_under_random_operations(
        model in prop::sample::select(MODELS.to_vec()),
        filesystem in prop::sample::select(Filesystem::ALL.to_vec()),
        commit_s in 1..8u64,
        writeback_s in 1..6u64,
        expire_s in 0..20u64,
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let config = DiskConfig {
            writeback: Duration::from_secs(writeback_s),
            dirty_expire: Duration::from_secs(expire_s),
            fsync_latency: Duration::from_millis(2),
            power_loss: model,
            filesystem,
            journal_commit: Duration::from_secs(commit_s),
            ..DiskConfig::default()
        };
        run_against_model(config, seed, &ops)?;
    }

    /// A kill leaves the machine up: a restarted process (a new handle on the same disk)
    /// reads every byte the old one wrote, fsynced or not, flushed or not.
    #[test]
    fn after_kill_a_reader_sees_every_byte_written(
        writes in prop::collection::vec(
            (0..3usize, 0..10_000u64, 1..5_000usize, 0..20_000u64),
            1..40,
        ),
    ) {
        clock::set(SimTime::ZERO);
        let disk = Disk::new(config(PowerLossModel::DropUnflushed), 7);
        let mut expected: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut now = SimTime::ZERO;
        for (i, &(file, offset, len, advance_ms)) in writes.iter().enumerate() {
            let path = FILES[file];
            let data = vec![(i % 255 + 1) as u8; len];
            let image = expected.entry(path.to_string()).or_default();
            if i % 3 == 0 {
                prop_assert_eq!(disk.append(path, &data), Ok(image.len() as u64));
                image.extend_from_slice(&data);
            } else {
                disk.write(path, offset, &data).unwrap();
                let end = offset as usize + len;
                if image.len() < end {
                    image.resize(end, 0);
                }
                image[offset as usize..end].copy_from_slice(&data);
            }
            if i % 5 == 0 {
                disk.fsync_now(path).unwrap();
            }
            now += Duration::from_millis(advance_ms);
            clock::set(now);
            disk.writeback(now);
        }
        let restarted = disk.clone();
        drop(disk);
        for (path, image) in &expected {
            let content = restarted.read_all(path).unwrap();
            prop_assert!(&content == image, "{}: {}", path, difference(image, &content));
        }
    }

    /// The flusher writes back exactly the pages dirty for at least `dirty_expire`.
    #[test]
    fn writeback_makes_only_pages_older_than_dirty_expire_durable(
        dirtied_s in prop::collection::vec(0..60u64, 1..12),
        wake_s in 60..100u64,
    ) {
        clock::set(SimTime::ZERO);
        let disk = Disk::new(config(PowerLossModel::DropUnflushed), 1);
        disk.create("p").unwrap();
        disk.fsync_dir_now("").unwrap();
        for (page, &second) in dirtied_s.iter().enumerate() {
            clock::set(SimTime::after_start(Duration::from_secs(second)));
            disk.write("p", (page * PAGE) as u64, &vec![page as u8 + 1; PAGE]).unwrap();
        }
        disk.writeback(SimTime::after_start(Duration::from_secs(wake_s)));
        let durable = disk.durable("p").unwrap();
        let mut still_dirty = Vec::new();
        for (page, &second) in dirtied_s.iter().enumerate() {
            let written = durable.get(page * PAGE) == Some(&(page as u8 + 1));
            let expired = wake_s - second >= 30;
            prop_assert_eq!(
                written,
                expired,
                "page {} dirtied at {}s, flusher at {}s",
                page,
                second,
                wake_s
            );
            if !expired {
                still_dirty.push(page as u64);
            }
        }
        prop_assert_eq!(disk.dirty_pages("p"), still_dirty);
    }

    /// Latent corruption hits the tail of the newest matching file only, every byte of it,
    /// and a seed replays it.
    #[test]
    fn corrupt_flips_only_the_tail_of_the_newest_matching_file(
        sizes in prop::collection::vec(0..10_000usize, 1..5),
        bytes in 1..3_000u64,
        seed in any::<u64>(),
    ) {
        let build = || {
            clock::set(SimTime::ZERO);
            let disk = Disk::new(config(PowerLossModel::DropUnflushed), seed);
            // Names sort against creation order, so "newest" cannot be "last by name".
            for (i, &size) in sizes.iter().enumerate() {
                let path = format!("orders-0/{:020}.log", 100 - i);
                disk.write(&path, 0, &vec![0x5a; size]).unwrap();
                disk.fsync_now(&path).unwrap();
            }
            disk.write("orders-0/99999.index", 0, &[0x5a; 500]).unwrap();
            disk.write("orders-1/00000000000000000000.log", 0, &[0x5a; 500]).unwrap();
            disk.fsync_now("orders-0/99999.index").unwrap();
            disk.fsync_now("orders-1/00000000000000000000.log").unwrap();
            disk.inject(DiskFault::Corrupt { glob: "orders-0/*.log".into(), bytes }).unwrap();
            disk
        };
        let disk = build();
        let newest = format!("orders-0/{:020}.log", 100 - (sizes.len() - 1));
        for path in all_files(&disk) {
            let content = disk.read_all(&path).unwrap();
            prop_assert_eq!(
                disk.durable(&path),
                Some(content.clone()),
                "{} reader sees the medium",
                &path
            );
            let tail = if path == newest {
                content.len().saturating_sub(bytes as usize)
            } else {
                content.len()
            };
            for (at, &byte) in content.iter().enumerate() {
                if at < tail {
                    prop_assert_eq!(byte, 0x5a, "{} byte {} changed", &path, at);
                } else {
                    let flipped = (byte ^ 0x5a).count_ones();
                    prop_assert_eq!(flipped, 1, "{} byte {} not flipped", &path, at);
                }
            }
        }
        let again = build();
        prop_assert_eq!(again.read_all(&newest).unwrap(), disk.read_all(&newest).unwrap());
    }

    /// Corruption anywhere flips one bit in each of `bytes` contiguous bytes of the newest
    /// matching file (all of it if shorter), from a seeded position, and a seed replays it.
    #[test]
    fn corrupt_anywhere_flips_a_seeded_run_of_the_newest_matching_file(
        size in 1..10_000usize,
        bytes in 1..3_000u64,
        seed in any::<u64>(),
    ) {
        let build = || {
            clock::set(SimTime::ZERO);
            let disk = Disk::new(config(PowerLossModel::DropUnflushed), seed);
            for path in ["orders-0/0.log", "orders-0/1.log"] {
                disk.write(path, 0, &vec![0x5a; size]).unwrap();
                disk.fsync_now(path).unwrap();
            }
            let glob = "orders-0/*.log".into();
            disk.inject(DiskFault::CorruptAnywhere { glob, bytes }).unwrap();
            disk
        };
        let disk = build();
        prop_assert_eq!(disk.read_all("orders-0/0.log").unwrap(), vec![0x5a; size]);
        let content = disk.read_all("orders-0/1.log").unwrap();
        prop_assert_eq!(disk.durable("orders-0/1.log"), Some(content.clone()));
        let flipped: Vec<usize> = (0..size).filter(|&at| content[at] != 0x5a).collect();
        prop_assert_eq!(flipped.len(), size.min(bytes as usize));
        prop_assert_eq!(flipped.last().unwrap() - flipped[0] + 1, flipped.len(), "contiguous");
        for at in flipped {
            prop_assert_eq!((content[at] ^ 0x5a).count_ones(), 1, "byte {}", at);
        }
        let again = build();
        prop_assert_eq!(again.read_all("orders-0/1.log").unwrap(), content);
    }
}

/// Where `anywhere` rots is the seed's choice, over the whole file, not its tail alone.
#[test]
fn corrupt_anywhere_lands_where_the_seed_says() {
    let mut positions = BTreeSet::new();
    for seed in 0..20 {
        at(0);
        let disk = Disk::new(DiskConfig::default(), seed);
        disk.write("s.log", 0, &[0; 1000]).unwrap();
        disk.fsync_now("s.log").unwrap();
        let glob = "*.log".into();
        disk.inject(DiskFault::CorruptAnywhere { glob, bytes: 1 })
            .unwrap();
        let content = disk.read_all("s.log").unwrap();
        positions.insert(content.iter().position(|&b| b != 0).unwrap());
    }
    assert!(positions.len() > 10, "{positions:?}");
    assert!(positions.iter().any(|&at| at < 500), "{positions:?}");
}

/// Under DropUnflushed a power loss leaves exactly the durable images; fsynced files survive,
/// unsynced creates vanish.
#[test]
fn power_loss_under_drop_unflushed_keeps_exactly_what_was_fsynced() {
    at(0);
    let disk = Disk::new(config(PowerLossModel::DropUnflushed), 3);
    disk.write("orders-0/0.log", 0, &[1; 5000]).unwrap();
    disk.fsync_now("orders-0/0.log").unwrap();
    disk.append("orders-0/0.log", &[2; 5000]).unwrap();
    disk.write("orders-0/1.log", 0, &[3; 100]).unwrap();
    disk.power_loss();
    assert_eq!(disk.read_all("orders-0/0.log").unwrap(), vec![1; 5000]);
    assert_eq!(
        disk.read_all("orders-0/1.log"),
        Err(not_found("orders-0/1.log"))
    );
    assert_eq!(disk.list("orders-0"), vec!["0.log"]);
}

/// A file whose data pages were all written back still vanishes if neither it nor its
/// directory was fsynced: data and names become durable separately.
#[test]
fn a_flushed_but_unnamed_file_vanishes_on_power_loss() {
    at(0);
    let disk = Disk::new(config(PowerLossModel::RandomWriteback), 3);
    disk.write("new", 0, &[1; 100]).unwrap();
    disk.writeback(at(40));
    assert!(disk.dirty_pages("new").is_empty());
    disk.power_loss();
    assert!(!disk.exists("new"));
}

/// ext4: a file created more than a commit interval before the power loss keeps its name,
/// and the pages the flusher wrote once the commit after them has named their size.
#[test]
fn ext4_keeps_a_name_after_a_commit_and_written_pages_after_the_next() {
    let crash_at = |seconds: u64| {
        at(0);
        let disk = Disk::new(ext4(), 3);
        disk.write("orders-0/0.log", 0, &[1; 3 * PAGE]).unwrap();
        for second in 1..=seconds {
            disk.writeback(at(second));
        }
        disk.power_loss();
        disk.read_all("orders-0/0.log")
            .ok()
            .map(|content| content.len())
    };
    assert_eq!(crash_at(4), None, "no commit yet: the create is lost");
    assert_eq!(
        crash_at(5),
        Some(0),
        "the commit at 5 s named the file, empty"
    );
    assert_eq!(
        crash_at(34),
        Some(0),
        "the flusher wrote the pages at 30 s; their size is not committed"
    );
    assert_eq!(
        crash_at(35),
        Some(3 * PAGE),
        "the commit at 35 s named their size"
    );
}

/// ext4 commits the whole running transaction at an fsync: one file's fsync makes another's
/// rename and create durable, but not the other's unwritten pages (delayed allocation).
#[test]
fn ext4_an_fsync_commits_every_name_but_only_its_own_pages() {
    at(0);
    let disk = Disk::new(ext4(), 3);
    disk.write("a/checkpoint.tmp", 0, b"42").unwrap();
    disk.rename("a/checkpoint.tmp", "a/checkpoint").unwrap();
    disk.write("b/0.log", 0, &[7; 100]).unwrap();
    disk.fsync_now("b/0.log").unwrap();
    disk.power_loss();
    assert_eq!(disk.list("a"), vec!["checkpoint"]);
    assert_eq!(
        disk.read_all("a/checkpoint").unwrap(),
        b"",
        "its data was never written"
    );
    assert_eq!(disk.read_all("b/0.log").unwrap(), vec![7; 100]);
}

/// ext4 commits nothing at an fsync of a file the running transaction does not hold.
#[test]
fn ext4_an_fsync_of_an_unchanged_file_commits_nothing() {
    at(0);
    let disk = Disk::new(ext4(), 3);
    disk.write("clean", 0, b"x").unwrap();
    disk.fsync_now("clean").unwrap();
    disk.write("new", 0, b"y").unwrap();
    disk.fsync_now("clean").unwrap();
    disk.fsync_dir_now("a").unwrap();
    disk.power_loss();
    assert_eq!(disk.list(""), vec!["clean"]);
    disk.write("a/new", 0, b"y").unwrap();
    disk.fsync_dir_now("a").unwrap();
    disk.power_loss();
    assert_eq!(
        disk.list("a"),
        vec!["new"],
        "a directory fsync commits its changes"
    );
}

/// ext4 journals a truncation at once: lost before the commit, durable after, and the
/// freed bytes never come back under a size grown again.
#[test]
fn ext4_a_truncation_reaches_the_medium_at_the_commit() {
    let truncated = |then_seconds: u64| {
        at(0);
        let disk = Disk::new(ext4(), 3);
        disk.write("log", 0, &[5; 6000]).unwrap();
        disk.fsync_now("log").unwrap();
        disk.set_len("log", 1000).unwrap();
        disk.set_len("log", 6000).unwrap();
        for second in 1..=then_seconds {
            disk.writeback(at(second));
        }
        disk.power_loss();
        disk.read_all("log").unwrap()
    };
    assert_eq!(
        truncated(4),
        vec![5; 6000],
        "before the commit: the old file"
    );
    let mut expected = vec![5; 1000];
    expected.resize(6000, 0);
    assert_eq!(truncated(5), expected, "after: zeros past the truncation");
}

/// ext4's `auto_da_alloc`: a file renamed over another is written before the commit that
/// holds the rename, so the replacement is never an empty file.
#[test]
fn ext4_a_rename_over_a_file_carries_its_data_into_the_commit() {
    at(0);
    let disk = Disk::new(ext4(), 3);
    disk.write("offsets", 0, b"old").unwrap();
    disk.fsync_now("offsets").unwrap();
    disk.write("offsets.tmp", 0, b"new").unwrap();
    disk.rename("offsets.tmp", "offsets").unwrap();
    disk.writeback(at(5));
    disk.power_loss();
    assert_eq!(disk.read_all("offsets").unwrap(), b"new");
}

/// Under ext4 no power-loss model keeps more than the commits named: a page written at the
/// instant of the power loss has no committed size to be read through.
#[test]
fn ext4_keeps_only_what_commits_named_under_every_power_loss_model() {
    for power_loss in MODELS {
        at(0);
        let disk = Disk::new(
            DiskConfig {
                power_loss,
                ..ext4()
            },
            9,
        );
        disk.write("log", 0, &[1; PAGE]).unwrap();
        disk.fsync_now("log").unwrap();
        disk.append("log", &[2; 4 * PAGE]).unwrap();
        disk.power_loss();
        assert_eq!(
            disk.read_all("log").unwrap(),
            vec![1; PAGE],
            "{power_loss:?}"
        );
    }
}

#[test]
fn fsync_error_is_reported_once_and_its_dropped_pages_never_come_back() {
    for model in MODELS {
        at(0);
        let disk = Disk::new(config(model), 11);
        disk.create("x").unwrap();
        disk.fsync_now("x").unwrap();
        disk.write("x", 0, &[b'A'; 100]).unwrap();
        disk.inject(DiskFault::FsyncError).unwrap();
        assert_eq!(disk.fsync_now("x"), Err(DiskError::Io("x".into())));
        assert_eq!(disk.fsync_now("x"), Ok(()), "{model:?}: reported once");
        assert_eq!(
            &disk.read_all("x").unwrap()[..100],
            &[b'A'; 100],
            "page cache keeps it"
        );
        disk.write("x", PAGE as u64, &[b'B'; 100]).unwrap();
        disk.fsync_now("x").unwrap();
        disk.writeback(at(100));
        disk.power_loss();
        let after = disk.read_all("x").unwrap();
        assert!(!after.contains(&b'A'), "{model:?}: dropped page came back");
        assert_eq!(
            &after[PAGE..],
            &[b'B'; 100],
            "{model:?}: a later fsync works"
        );
    }
}

#[test]
fn fsync_error_fails_a_directory_fsync_too_and_leaves_the_entries_pending() {
    at(0);
    let disk = Disk::new(config(PowerLossModel::DropUnflushed), 11);
    disk.create("d/x").unwrap();
    disk.inject(DiskFault::FsyncError).unwrap();
    assert_eq!(disk.fsync_dir_now("d"), Err(DiskError::Io("d".into())));
    assert_eq!(disk.durable("d/x"), None);
    disk.fsync_dir_now("d").unwrap();
    assert_eq!(disk.durable("d/x"), Some(Vec::new()));
}

/// The flusher sleeps between wakes: an expired page waits for the next wake.
#[test]
fn writeback_acts_only_every_writeback_interval() {
    at(0);
    let config = DiskConfig {
        dirty_expire: Duration::ZERO,
        ..config(PowerLossModel::DropUnflushed)
    };
    let disk = Disk::new(config, 1);
    disk.write("p", 0, &[1; 10]).unwrap();
    disk.writeback(at(1));
    assert_eq!(disk.dirty_pages("p"), vec![0]);
    disk.writeback(at(5));
    assert!(disk.dirty_pages("p").is_empty());
    disk.write("p", 0, &[2; 10]).unwrap();
    disk.writeback(SimTime::from_millis(9_999));
    assert_eq!(disk.dirty_pages("p"), vec![0]);
    disk.writeback(at(10));
    assert!(disk.dirty_pages("p").is_empty());
}

#[test]
fn rename_is_durable_only_after_a_directory_or_file_fsync() {
    let setup = || {
        at(0);
        let disk = Disk::new(config(PowerLossModel::DropUnflushed), 5);
        disk.write("d/checkpoint.tmp", 0, b"42").unwrap();
        disk.fsync_now("d/checkpoint.tmp").unwrap();
        disk.rename("d/checkpoint.tmp", "d/checkpoint").unwrap();
        disk
    };
    let disk = setup();
    disk.power_loss();
    assert_eq!(
        disk.list("d"),
        vec!["checkpoint.tmp"],
        "rename without fsync is lost"
    );

    let disk = setup();
    disk.fsync_dir_now("d").unwrap();
    disk.power_loss();
    assert_eq!(disk.list("d"), vec!["checkpoint"]);
    assert_eq!(disk.read_all("d/checkpoint").unwrap(), b"42");

    let disk = setup();
    disk.fsync_now("d/checkpoint").unwrap();
    disk.power_loss();
    assert_eq!(
        disk.list("d"),
        vec!["checkpoint"],
        "fsync(file) makes its current name durable"
    );
}

#[test]
fn delete_is_durable_only_after_a_directory_fsync() {
    at(0);
    let disk = Disk::new(config(PowerLossModel::DropUnflushed), 5);
    disk.write("t-0/0.log", 0, b"old").unwrap();
    disk.write("t-0/1.log", 0, b"new").unwrap();
    disk.fsync_dir_now("t-0").unwrap();
    disk.delete("t-0/0.log").unwrap();
    disk.power_loss();
    assert_eq!(
        disk.list("t-0"),
        vec!["0.log", "1.log"],
        "delete without fsync is lost"
    );

    disk.delete("t-0/0.log").unwrap();
    disk.fsync_dir_now("t-0").unwrap();
    disk.power_loss();
    assert_eq!(disk.list("t-0"), vec!["1.log"]);

    disk.delete_dir("t-0").unwrap();
    disk.power_loss();
    assert!(disk.exists("t-0"), "delete_dir without fsync is lost");
    disk.delete_dir("t-0").unwrap();
    disk.fsync_dir_now("").unwrap();
    disk.power_loss();
    assert!(
        !disk.exists("t-0"),
        "fsync of the parent forgets the removed directory"
    );
}

#[test]
fn disk_full_fails_writes_until_heal() {
    at(0);
    let disk = Disk::new(config(PowerLossModel::DropUnflushed), 5);
    disk.write("f", 0, b"abc").unwrap();
    disk.inject(DiskFault::Full).unwrap();
    assert_eq!(
        disk.write("f", 0, b"x"),
        Err(DiskError::NoSpace("f".into()))
    );
    assert_eq!(disk.append("f", b"x"), Err(DiskError::NoSpace("f".into())));
    assert_eq!(disk.create("g"), Err(DiskError::NoSpace("g".into())));
    assert_eq!(disk.read_all("f").unwrap(), b"abc");
    assert!(!disk.exists("g"));
    disk.inject(DiskFault::Heal).unwrap();
    assert_eq!(disk.append("f", b"d"), Ok(3));
    assert_eq!(disk.read_all("f").unwrap(), b"abcd");
}

#[test]
fn corrupt_without_a_matching_file_is_not_found() {
    let disk = Disk::new(DiskConfig::default(), 5);
    disk.write("orders-0/0.index", 0, b"x").unwrap();
    let fault = DiskFault::Corrupt {
        glob: "orders-0/*.log".into(),
        bytes: 4,
    };
    assert_eq!(disk.inject(fault), Err(not_found("orders-0/*.log")));
    let nested = DiskFault::Corrupt {
        glob: "*.index".into(),
        bytes: 4,
    };
    assert!(disk.inject(nested).is_err(), "`*` does not cross a `/`");
}

/// TornTail keeps sectors of the last dirty page only, and which sectors is a seeded choice.
#[test]
fn torn_tail_persists_a_seeded_sector_prefix_of_the_last_dirty_page() {
    let mut outcomes = BTreeSet::new();
    for seed in 0..40 {
        at(0);
        let disk = Disk::new(config(PowerLossModel::TornTail), seed);
        disk.create("s").unwrap();
        disk.fsync_now("s").unwrap();
        let data: Vec<u8> = (0..2 * PAGE + 1500).map(|i| (i % 251 + 1) as u8).collect();
        disk.append("s", &data).unwrap();
        disk.power_loss();
        let after = disk.read_all("s").unwrap();
        let kept = after.len().saturating_sub(2 * PAGE);
        outcomes.insert(kept);
        if kept == 0 {
            assert!(after.is_empty(), "seed {seed}: nothing torn, nothing kept");
            continue;
        }
        assert!(
            after[..2 * PAGE].iter().all(|&b| b == 0),
            "earlier dirty pages are lost"
        );
        assert!(
            [0, 512, 1024, 1500].contains(&kept),
            "seed {seed}: {kept} bytes of the last page"
        );
        assert_eq!(&after[2 * PAGE..], &data[2 * PAGE..2 * PAGE + kept]);
    }
    assert!(
        outcomes.len() > 2,
        "the tear point varies with the seed: {outcomes:?}"
    );
}

#[test]
fn random_writeback_is_the_same_for_the_same_seed() {
    let run = |seed| {
        at(0);
        let disk = Disk::new(config(PowerLossModel::RandomWriteback), seed);
        disk.create("r").unwrap();
        disk.fsync_now("r").unwrap();
        disk.append("r", &vec![9; 16 * PAGE]).unwrap();
        disk.power_loss();
        disk.read_all("r").unwrap()
    };
    assert_eq!(run(21), run(21));
    assert_ne!(run(21), run(22), "different seeds choose different pages");
}

#[test]
fn list_exists_and_dump_show_the_page_cache_view() {
    at(0);
    let disk = Disk::new(DiskConfig::default(), 5);
    disk.write("orders-0/00000000000000000000.log", 0, b"log")
        .unwrap();
    disk.write("orders-0/00000000000000000000.index", 0, b"idx")
        .unwrap();
    disk.write("orders-10/00000000000000000000.log", 0, b"x")
        .unwrap();
    disk.write("recovery-point-offset-checkpoint", 0, b"0\n")
        .unwrap();
    assert_eq!(
        disk.list(""),
        vec!["orders-0", "orders-10", "recovery-point-offset-checkpoint"]
    );
    assert_eq!(disk.list_dirs(""), vec!["orders-0", "orders-10"]);
    assert_eq!(
        disk.list("orders-0/"),
        vec!["00000000000000000000.index", "00000000000000000000.log"]
    );
    assert!(disk.exists("orders-0"));
    assert!(!disk.exists("orders-1"));
    assert_eq!(
        disk.read("orders-0/00000000000000000000.log", 1, 10)
            .unwrap(),
        b"og"
    );
    assert_eq!(
        disk.read("orders-0/00000000000000000000.log", 10, 10)
            .unwrap(),
        b""
    );

    let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("disk-dump");
    let _ = std::fs::remove_dir_all(&root);
    disk.dump_to(&root).unwrap();
    let dumped = std::fs::read(root.join("orders-0/00000000000000000000.index")).unwrap();
    assert_eq!(dumped, b"idx");
}

/// RocketMQ preallocates 1 GiB files: a dump writes only their written pages, the rest a
/// hole, and reads back with zeros there and the bytes where they were written.
#[test]
fn a_dump_is_sparse_where_the_file_is_zeros() {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::MetadataExt;
    at(0);
    let disk = Disk::new(DiskConfig::default(), 5);
    let path = "store/commitlog/00000000000000000000";
    disk.create(path).unwrap();
    disk.set_len(path, 1 << 30).unwrap();
    disk.write(path, (1 << 29) + 10, b"message").unwrap();
    let root = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("sparse-dump");
    let _ = std::fs::remove_dir_all(&root);
    disk.dump_to(&root).unwrap();
    let mut file = std::fs::File::open(root.join(path)).unwrap();
    let meta = file.metadata().unwrap();
    assert_eq!(meta.len(), 1 << 30);
    assert!(
        meta.blocks() * 512 < 1 << 20,
        "{} blocks allocated",
        meta.blocks()
    );
    let mut bytes = [0u8; 17];
    file.seek(SeekFrom::Start(1 << 29)).unwrap();
    file.read_exact(&mut bytes).unwrap();
    assert_eq!(&bytes, b"\0\0\0\0\0\0\0\0\0\0message");
}

/// Inside a host, fsync costs the configured latency plus any slow-disk latency, in
/// simulated time.
#[test]
fn fsync_waits_the_simulated_latency_plus_slow_disk() {
    let mut sim = turmoil::Builder::new().build();
    sim.client("broker-0", async {
        let disk = Disk::new(DiskConfig::default(), 5);
        disk.write("f", 0, b"x").unwrap();
        disk.inject(DiskFault::Slow(Duration::from_millis(50)))
            .unwrap();
        let start = tokio::time::Instant::now();
        disk.fsync("f").await.unwrap();
        let fsynced = start.elapsed();
        disk.write_gate().await;
        let delayed = start.elapsed();
        disk.inject(DiskFault::Heal).unwrap();
        disk.fsync_dir("").await.unwrap();
        let healed = start.elapsed();
        assert!((52..55).contains(&fsynced.as_millis()), "{fsynced:?}");
        assert!((102..106).contains(&delayed.as_millis()), "{delayed:?}");
        assert!((104..109).contains(&healed.as_millis()), "{healed:?}");
        assert_eq!(disk.durable("f"), Some(b"x".to_vec()));
        Ok(())
    });
    sim.run().unwrap();
}

/// A disk with little memory and the given device rate (bytes per second): dirty limit
/// 20 % of 1 MiB (51 pages), background writeback from 10 % (25 pages).
fn small_host(throughput: Option<u64>) -> DiskConfig {
    DiskConfig {
        memory: 1 << 20,
        throughput,
        ..config(PowerLossModel::DropUnflushed)
    }
}

/// `pages` whole pages of file `path`, each written at its own millisecond from `from_ms`.
fn write_pages(disk: &Disk, path: &str, pages: u64, from_ms: u64) {
    for page in 0..pages {
        clock::set(SimTime::from_millis(from_ms + page));
        disk.write(path, page * PAGE_BYTES, &[7; PAGE]).unwrap();
    }
}

#[test]
fn past_the_background_limit_the_flusher_writes_the_oldest_pages_at_once() {
    let config = small_host(None);
    let background_pages = config.background_limit() / PAGE_BYTES;
    let disk = Disk::new(config, 1);
    write_pages(&disk, "old", 20, 0);
    write_pages(&disk, "new", 20, 100);
    disk.writeback(SimTime::from_millis(200));
    assert_eq!(disk.dirty_bytes(), background_pages * PAGE_BYTES);
    // The 15 oldest pages went, all of `old`'s first: none had expired.
    let written = 40 - background_pages;
    assert_eq!(disk.dirty_pages("old"), (written..20).collect::<Vec<_>>());
    assert_eq!(disk.dirty_pages("new").len(), 20);
}

#[test]
fn a_throughput_paces_the_flusher() {
    let config = DiskConfig {
        dirty_expire: Duration::ZERO,
        ..small_host(Some(10 * PAGE_BYTES))
    };
    let disk = Disk::new(config, 1);
    write_pages(&disk, "f", 20, 0);
    // The flusher wakes at 5 s: all 20 pages are due, the device writes 10 a second.
    for ms in 20..=6_000 {
        disk.writeback(SimTime::from_millis(ms));
    }
    assert_eq!(disk.dirty_pages("f"), (10..20).collect::<Vec<_>>());
    for ms in 6_001..=7_000 {
        disk.writeback(SimTime::from_millis(ms));
    }
    assert!(disk.dirty_pages("f").is_empty());
}

#[test]
fn an_fsync_under_a_throughput_waits_for_its_pages_behind_the_others() {
    let mut sim = turmoil::Builder::new().build();
    sim.client("broker-0", async {
        let disk = Disk::new(small_host(Some(100 * PAGE_BYTES)), 5);
        for page in 0..50 {
            disk.write("f", page * PAGE_BYTES, &[1; PAGE]).unwrap();
            disk.write("g", page * PAGE_BYTES, &[2; PAGE]).unwrap();
        }
        let start = tokio::time::Instant::now();
        let (f, g) = tokio::join!(disk.fsync("f"), disk.fsync("g"));
        f.unwrap();
        g.unwrap();
        // 50 pages at 100 a second each, one after the other, plus the 2 ms latency.
        let both = start.elapsed().as_millis();
        assert!((1_002..1_005).contains(&both), "{both} ms");
        assert_eq!(disk.dirty_bytes(), 0);
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn a_writer_waits_while_dirty_pages_pass_the_dirty_limit() {
    let mut sim = turmoil::Builder::new().build();
    sim.client("broker-0", async {
        let config = small_host(Some(100 * PAGE_BYTES));
        let limit = config.dirty_limit();
        let background = config.background_limit();
        let disk = Disk::new(config, 5);
        let flusher = disk.clone();
        tokio::task::spawn_local(async move {
            loop {
                flusher.writeback(clock::now());
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        });
        let start = tokio::time::Instant::now();
        disk.write_gate().await;
        assert_eq!(start.elapsed(), Duration::ZERO, "nothing dirty, no wait");
        for page in 0..101 {
            disk.write("f", page * PAGE_BYTES, &[1; PAGE]).unwrap();
        }
        disk.write_gate().await;
        // 101 pages dirty, 51 allowed: the writer waits while the device writes the 50
        // pages over the limit, 100 a second.
        let waited = start.elapsed().as_millis();
        assert!((500..560).contains(&waited), "{waited} ms");
        assert!(disk.dirty_bytes() <= limit);
        assert!(
            disk.dirty_bytes() > background,
            "the flusher is still at it"
        );
        Ok(())
    });
    sim.run().unwrap();
}

#[test]
fn a_slow_disk_s_throughput_lasts_until_heal() {
    let mut sim = turmoil::Builder::new().build();
    sim.client("broker-0", async {
        let disk = Disk::new(DiskConfig::default(), 5);
        disk.inject(DiskFault::Throughput(10 * PAGE_BYTES)).unwrap();
        disk.write("f", 0, &[1; 10 * PAGE]).unwrap();
        let start = tokio::time::Instant::now();
        disk.fsync("f").await.unwrap();
        let slowed = start.elapsed().as_millis();
        assert!((1_002..1_005).contains(&slowed), "{slowed} ms");
        disk.inject(DiskFault::Heal).unwrap();
        disk.write("f", 0, &[2; 10 * PAGE]).unwrap();
        let start = tokio::time::Instant::now();
        disk.fsync("f").await.unwrap();
        let healed = start.elapsed().as_millis();
        assert!((2..5).contains(&healed), "{healed} ms");
        Ok(())
    });
    sim.run().unwrap();
}

proptest! {
    /// Whatever is written, when, the flusher never writes faster than the device, and
    /// once every page has expired it has written them all.
    #[test]
    fn the_flusher_keeps_to_the_device_s_throughput(
        pages_per_second in 1..200u64,
        writes in prop::collection::vec((0..3usize, 0..80u64, 0..40u64), 1..150),
    ) {
        let config = DiskConfig {
            memory: 2 << 20, // background limit 51 pages, dirty limit 102
            throughput: Some(pages_per_second * PAGE_BYTES),
            ..config(PowerLossModel::DropUnflushed)
        };
        let disk = Disk::new(config, 1);
        let mut dirtied = 0;
        let mut now_ms = 0;
        let mut writes = writes.into_iter();
        let check = |disk: &Disk, dirtied: u64, now_ms: u64| -> Result<(), TestCaseError> {
            let written = dirtied - disk.dirty_bytes();
            let allowed = pages_per_second * PAGE_BYTES * now_ms / 1_000 + PAGE_BYTES;
            prop_assert!(written <= allowed, "{written} bytes written back by {now_ms} ms, allowed {allowed}");
            Ok(())
        };
        loop {
            let next = writes.next();
            let until = match next {
                Some((_, _, gap)) => now_ms + gap,
                // Every page expires and the device writes them all.
                None => now_ms + 36_000 + disk.dirty_bytes() / PAGE_BYTES * 1_000 / pages_per_second + 1_000,
            };
            while now_ms < until {
                now_ms += 1;
                disk.writeback(SimTime::from_millis(now_ms));
                check(&disk, dirtied, now_ms)?;
            }
            let Some((file, page, _)) = next else { break };
            clock::set(SimTime::from_millis(now_ms));
            let before = disk.dirty_bytes();
            disk.write(FILES[file], page * PAGE_BYTES, &[1; PAGE]).unwrap();
            dirtied += disk.dirty_bytes() - before;
        }
        prop_assert_eq!(disk.dirty_bytes(), 0);
    }
}
