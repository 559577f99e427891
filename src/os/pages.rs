//! The bytes of a file image as 4 KiB pages shared between images.
//!
//! A simulated file has two images, the page cache and the medium, which hold the same
//! bytes except where pages are dirty. Storing each page once behind an `Rc` and copying it
//! only when one image writes to it (copy on write) keeps a log's bytes in memory once, not
//! twice: an fsync or a write-back shares the written pages instead of copying them, and a
//! power loss resets the cache to the medium by sharing every page. Growth is a page at a
//! time, so an image never holds more than a page of slack.
//!
//! Invariant: the bytes of the last page past `len` are zero, so extending an image reads
//! zeros there without touching it.

use std::rc::Rc;

/// The page size of the page cache and of dirty tracking.
pub const PAGE_BYTES: u64 = 4096;

const PAGE: usize = PAGE_BYTES as usize;

type Page = [u8; PAGE];

thread_local! {
    /// The page every image grows by, shared: growing allocates nothing, and a page is
    /// copied only when a write makes it its own.
    static ZERO: Rc<Page> = Rc::new([0; PAGE]);
}

/// One file image: `len` bytes in shared pages.
#[derive(Clone, Default)]
pub struct Pages {
    pages: Vec<Rc<Page>>,
    len: u64,
}

impl Pages {
    pub fn new() -> Pages {
        Pages::default()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Up to `len` bytes from `offset`; shorter at the end.
    pub fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.readable(offset, len));
        self.each_chunk(offset, len, |chunk| out.extend_from_slice(chunk));
        out
    }

    /// Fill `buf` from `offset` without allocating; returns how many bytes there were
    /// (fewer than `buf.len()` at the end).
    pub fn read_into(&self, offset: u64, buf: &mut [u8]) -> usize {
        let mut filled = 0;
        self.each_chunk(offset, buf.len(), |chunk| {
            buf[filled..filled + chunk.len()].copy_from_slice(chunk);
            filled += chunk.len();
        });
        filled
    }

    fn readable(&self, offset: u64, len: usize) -> usize {
        let start = offset.min(self.len);
        (start.saturating_add(len as u64).min(self.len) - start) as usize
    }

    /// The bytes of `len` from `offset` (clipped to the end), page by page.
    fn each_chunk(&self, offset: u64, len: usize, mut f: impl FnMut(&[u8])) {
        let start = offset.min(self.len);
        let end = start + self.readable(offset, len) as u64;
        let mut at = start;
        while at < end {
            let (page, within) = ((at / PAGE_BYTES) as usize, (at % PAGE_BYTES) as usize);
            let take = (PAGE - within).min((end - at) as usize);
            f(&self.pages[page][within..within + take]);
            at += take as u64;
        }
    }

    /// Each page holding a byte other than zero, as its offset and its bytes (the last
    /// one cut at the end): what a sparse copy of the image must write.
    pub fn written_pages(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.pages.iter().enumerate().filter_map(|(i, page)| {
            let at = i as u64 * PAGE_BYTES;
            let bytes = &page[..(self.len - at).min(PAGE_BYTES) as usize];
            bytes.iter().any(|&b| b != 0).then_some((at, bytes))
        })
    }

    /// Whether the first `len` bytes of both images are the same, page by page (a page the
    /// two share is not read): a check over a preallocated 1 GiB file allocates nothing.
    pub fn same_prefix(&self, other: &Pages, len: u64) -> bool {
        if self.len < len || other.len < len {
            return false;
        }
        let pages = len.div_ceil(PAGE_BYTES) as usize;
        (0..pages).all(|i| {
            let (a, b) = (&self.pages[i], &other.pages[i]);
            let upto = (len - i as u64 * PAGE_BYTES).min(PAGE_BYTES) as usize;
            Rc::ptr_eq(a, b) || a[..upto] == b[..upto]
        })
    }

    /// Every byte, in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        self.read(0, self.len as usize)
    }

    /// Write `data` at `offset`; a gap past the end reads as zeros.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        if end > self.len {
            self.set_len(end);
        }
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let (page, within) = ((at / PAGE_BYTES) as usize, (at % PAGE_BYTES) as usize);
            let take = (PAGE - within).min(rest.len());
            Rc::make_mut(&mut self.pages[page])[within..within + take]
                .copy_from_slice(&rest[..take]);
            rest = &rest[take..];
            at += take as u64;
        }
    }

    /// Truncate, or extend with zeros.
    pub fn set_len(&mut self, len: u64) {
        let pages = len.div_ceil(PAGE_BYTES) as usize;
        if len < self.len {
            self.pages.truncate(pages);
            let within = (len % PAGE_BYTES) as usize;
            if let (Some(last), true) = (self.pages.last_mut(), within > 0) {
                if last[within..].iter().any(|&b| b != 0) {
                    Rc::make_mut(last)[within..].fill(0);
                }
            }
        } else if pages > self.pages.len() {
            self.pages.resize(pages, ZERO.with(Rc::clone));
        }
        self.len = len;
    }

    /// Copy the first `limit` bytes of `page` from `source`, extending this image to cover
    /// them (never past `source`'s length): a write-back from the cache to the medium. A
    /// whole page is shared, not copied.
    pub fn copy_page_from(&mut self, source: &Pages, page: u64, limit: u64) {
        let start = page * PAGE_BYTES;
        let end = (start + limit.min(PAGE_BYTES)).min(source.len);
        if end <= start {
            return;
        }
        if self.len < end {
            self.set_len(end);
        }
        // Sharing is exact when the bytes past `end` in the page agree: there are none, or
        // both sides hold zeros there (past both lengths).
        let index = page as usize;
        if end - start == PAGE_BYTES || (end == source.len && self.len == end) {
            self.pages[index] = source.pages[index].clone();
        } else {
            let (from, to) = (0, (end - start) as usize);
            Rc::make_mut(&mut self.pages[index])[from..to]
                .copy_from_slice(&source.pages[index][from..to]);
        }
    }

    /// XOR one byte (it must be below `len`).
    pub fn flip(&mut self, at: u64, mask: u8) {
        let (page, within) = ((at / PAGE_BYTES) as usize, (at % PAGE_BYTES) as usize);
        Rc::make_mut(&mut self.pages[page])[within] ^= mask;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The same operations on a plain buffer: what `Pages` must be indistinguishable from.
    #[derive(Clone, Debug, Default)]
    struct Model(Vec<u8>);

    impl Model {
        fn write(&mut self, offset: u64, data: &[u8]) {
            let end = offset as usize + data.len();
            if end > self.0.len() {
                self.0.resize(end, 0);
            }
            self.0[offset as usize..end].copy_from_slice(data);
        }

        fn copy_page_from(&mut self, source: &Model, page: u64, limit: u64) {
            let start = page * PAGE_BYTES;
            let end = (start + limit.min(PAGE_BYTES)).min(source.0.len() as u64);
            if end <= start {
                return;
            }
            let (start, end) = (start as usize, end as usize);
            if self.0.len() < end {
                self.0.resize(end, 0);
            }
            self.0[start..end].copy_from_slice(&source.0[start..end]);
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// Write to the cache image.
        Write(u64, Vec<u8>),
        /// Resize one image (cache if true).
        SetLen(bool, u64),
        /// Write a page back from the cache to the medium.
        WriteBack(u64, u64),
        /// The cache becomes the medium (a power loss).
        Reset,
        Flip(bool, u64, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        let offset = 0..3 * PAGE_BYTES;
        prop_oneof![
            (offset.clone(), prop::collection::vec(1u8..=255, 0..6000))
                .prop_map(|(o, d)| Op::Write(o, d)),
            (any::<bool>(), offset.clone()).prop_map(|(c, l)| Op::SetLen(c, l)),
            (0..4u64, prop_oneof![Just(PAGE_BYTES), 0..PAGE_BYTES])
                .prop_map(|(p, l)| Op::WriteBack(p, l)),
            Just(Op::Reset),
            (any::<bool>(), offset, 1u8..=255).prop_map(|(c, a, m)| Op::Flip(c, a, m)),
        ]
    }

    proptest! {
        #[test]
        fn shared_pages_read_like_two_plain_buffers(ops in prop::collection::vec(op(), 1..40)) {
            let (mut cache, mut medium) = (Pages::new(), Pages::new());
            let (mut cache_model, mut medium_model) = (Model::default(), Model::default());
            for op in ops {
                match op {
                    Op::Write(offset, data) => {
                        cache.write(offset, &data);
                        cache_model.write(offset, &data);
                    }
                    Op::SetLen(true, len) => {
                        cache.set_len(len);
                        cache_model.0.resize(len as usize, 0);
                    }
                    Op::SetLen(false, len) => {
                        medium.set_len(len);
                        medium_model.0.resize(len as usize, 0);
                    }
                    Op::WriteBack(page, limit) => {
                        medium.copy_page_from(&cache, page, limit);
                        medium_model.copy_page_from(&cache_model, page, limit);
                    }
                    Op::Reset => {
                        cache = medium.clone();
                        cache_model = medium_model.clone();
                    }
                    Op::Flip(on_cache, at, mask) => {
                        let (image, model) = if on_cache {
                            (&mut cache, &mut cache_model)
                        } else {
                            (&mut medium, &mut medium_model)
                        };
                        if at < image.len() {
                            image.flip(at, mask);
                            model.0[at as usize] ^= mask;
                        }
                    }
                }
                prop_assert_eq!(cache.to_vec(), cache_model.0.clone());
                prop_assert_eq!(medium.to_vec(), medium_model.0.clone());
                // The shared prefix and the written pages read as the plain buffers do.
                let common = cache.len().min(medium.len());
                let prefix = cache_model.0[..common as usize] == medium_model.0[..common as usize];
                prop_assert_eq!(cache.same_prefix(&medium, common), prefix);
                let mut sparse = vec![0; cache.len() as usize];
                for (at, bytes) in cache.written_pages() {
                    prop_assert!(bytes.iter().any(|&b| b != 0));
                    sparse[at as usize..at as usize + bytes.len()].copy_from_slice(bytes);
                }
                prop_assert_eq!(&sparse, &cache_model.0);
                // Past the end, an image reads as zeros once extended.
                let mut grown = cache.clone();
                grown.set_len(cache.len() + PAGE_BYTES);
                prop_assert!(grown.read(cache.len(), PAGE).iter().all(|&b| b == 0));
            }
        }

        #[test]
        fn a_read_is_the_slice_of_the_buffer(
            data in prop::collection::vec(any::<u8>(), 0..10_000),
            offset in 0..12_000u64,
            len in 0..9000usize,
        ) {
            let mut pages = Pages::new();
            pages.write(0, &data);
            let start = (offset as usize).min(data.len());
            let end = start.saturating_add(len).min(data.len());
            prop_assert_eq!(pages.read(offset, len), data[start..end].to_vec());
            let mut buf = vec![0xAA; len];
            let filled = pages.read_into(offset, &mut buf);
            prop_assert_eq!(&buf[..filled], &data[start..end]);
            prop_assert!(buf[filled..].iter().all(|&b| b == 0xAA), "nothing past the end is written");
        }
    }

    #[test]
    fn a_written_back_page_is_shared_until_either_image_writes_it() {
        let mut cache = Pages::new();
        cache.write(0, &[7; PAGE]);
        let mut medium = Pages::new();
        medium.copy_page_from(&cache, 0, PAGE_BYTES);
        assert!(Rc::ptr_eq(&cache.pages[0], &medium.pages[0]));
        cache.write(1, &[9]);
        assert!(!Rc::ptr_eq(&cache.pages[0], &medium.pages[0]));
        assert_eq!(medium.read(0, 2), vec![7, 7]);
        assert_eq!(cache.read(0, 2), vec![7, 9]);
    }
}
