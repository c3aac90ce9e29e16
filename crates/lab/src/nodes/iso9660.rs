//! The lab's own ISO 9660 reader: what a Talos VM does with the CD-ROM attached at start.
//! It reads the primary volume descriptor's volume id and the files of the root directory,
//! named by their Rock Ridge `NM` entry when there is one (capstan and `genisoimage -R` write
//! one) and by their ISO 9660 identifier otherwise (`USER_DATA.;1` → `user_data.`, as Linux
//! shows a plain image with `map=normal`: lowercased, version dropped).
//!
//! Independent of capstan's writer on purpose: the lab judges capstan. The image comes from a
//! repository and a network upload, so every offset and length is checked against the image;
//! sizes and counts are bounded; a malformed image is refused with a reason, never a panic.

/// A logical sector (the only block size the reader takes; every CD image uses it).
const SECTOR: usize = 2048;
/// The largest image read: a cidata image is tens of KiB.
pub const MAX_IMAGE_BYTES: usize = 16 * 1024 * 1024;
/// The most files read from the root directory.
pub const MAX_FILES: usize = 32;
/// The largest file read.
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;
/// The largest root directory read (sectors): bounds the walk.
const MAX_DIRECTORY_SECTORS: usize = 4;
/// Volume descriptors looked at before giving up on a terminator.
const MAX_DESCRIPTORS: usize = 16;

/// Why an image cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsoReadError {
    /// The image is larger than [`MAX_IMAGE_BYTES`].
    #[error("the image has {0} bytes; at most {MAX_IMAGE_BYTES} are read")]
    ImageTooLarge(usize),
    /// No primary volume descriptor where ISO 9660 puts it.
    #[error("no ISO 9660 primary volume descriptor")]
    NoPrimaryDescriptor,
    /// The logical block size is not 2,048.
    #[error("logical block size {0}; only 2048 is read")]
    BlockSize(u16),
    /// A directory record is malformed or points outside the image.
    #[error("a directory record is malformed: {0}")]
    Record(&'static str),
    /// More than [`MAX_FILES`] files in the root directory.
    #[error("more than {MAX_FILES} files in the root directory")]
    TooManyFiles,
    /// A file is larger than [`MAX_FILE_BYTES`].
    #[error("a file has {0} bytes; at most {MAX_FILE_BYTES} are read")]
    FileTooLarge(u32),
    /// A name is not UTF-8 or is empty.
    #[error("a file name is not readable")]
    Name,
    /// Two files have the same name.
    #[error("two files are named `{0}`")]
    DuplicateName(String),
}

/// One file of the root directory.
#[derive(Clone, PartialEq, Eq)]
pub struct IsoEntry {
    /// Its name (Rock Ridge, else the ISO 9660 identifier lowercased without its version).
    pub name: String,
    /// Its contents.
    pub contents: Vec<u8>,
}

impl std::fmt::Debug for IsoEntry {
    // A machine config holds secrets: show the size, never the bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "IsoEntry({}, {} bytes)", self.name, self.contents.len())
    }
}

/// What the reader found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsoImage {
    /// The primary volume descriptor's volume id, trailing spaces removed.
    pub volume_id: String,
    /// The root directory's files (directories skipped), in directory order.
    pub files: Vec<IsoEntry>,
}

impl IsoImage {
    /// The contents of the file `name`.
    pub fn file(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.contents.as_slice())
    }
}

/// Reads `image`.
///
/// # Errors
/// [`IsoReadError`] for an image past the bounds or not ISO 9660 as read here.
pub fn read_image(image: &[u8]) -> Result<IsoImage, IsoReadError> {
    if image.len() > MAX_IMAGE_BYTES {
        return Err(IsoReadError::ImageTooLarge(image.len()));
    }
    let pvd = primary_descriptor(image)?;
    let block_size = u16::from_le_bytes([pvd[128], pvd[129]]);
    if usize::from(block_size) != SECTOR {
        return Err(IsoReadError::BlockSize(block_size));
    }
    let volume_id = String::from_utf8_lossy(&pvd[40..72])
        .trim_end_matches([' ', '\0'])
        .to_owned();
    let root = Record::parse(&pvd[156..190]).ok_or(IsoReadError::Record("root"))?;
    if !root.is_directory {
        return Err(IsoReadError::Record("the root is no directory"));
    }
    let directory_len = usize::try_from(root.size).map_err(|_| IsoReadError::Record("size"))?;
    if directory_len > MAX_DIRECTORY_SECTORS * SECTOR {
        return Err(IsoReadError::Record("the root directory is too large"));
    }
    let directory = extent(image, root.extent, directory_len)?;
    Ok(IsoImage {
        volume_id,
        files: root_files(image, directory)?,
    })
}

/// The first primary volume descriptor from sector 16, before the set terminator.
fn primary_descriptor(image: &[u8]) -> Result<&[u8], IsoReadError> {
    for index in 16..16 + MAX_DESCRIPTORS {
        let Some(descriptor) = image.get(index * SECTOR..(index + 1) * SECTOR) else {
            break;
        };
        if &descriptor[1..6] != b"CD001" {
            break;
        }
        match descriptor[0] {
            1 => return Ok(descriptor),
            255 => break,
            _ => {}
        }
    }
    Err(IsoReadError::NoPrimaryDescriptor)
}

/// `length` bytes from sector `sector`, or a refusal if they are not all in the image.
fn extent(image: &[u8], sector: u32, length: usize) -> Result<&[u8], IsoReadError> {
    let start = usize::try_from(sector)
        .ok()
        .and_then(|s| s.checked_mul(SECTOR))
        .ok_or(IsoReadError::Record("extent"))?;
    let end = start
        .checked_add(length)
        .ok_or(IsoReadError::Record("extent"))?;
    image
        .get(start..end)
        .ok_or(IsoReadError::Record("an extent lies outside the image"))
}

fn root_files(image: &[u8], directory: &[u8]) -> Result<Vec<IsoEntry>, IsoReadError> {
    let mut files: Vec<IsoEntry> = Vec::new();
    let mut offset = 0;
    // Each step moves forward by a record's nonzero length or to the next sector: the walk
    // ends within the (bounded) directory whatever the bytes say.
    while offset < directory.len() {
        let length = usize::from(directory[offset]);
        if length == 0 {
            // Records do not cross sectors; a zero pads to the next one.
            offset = (offset / SECTOR + 1) * SECTOR;
            continue;
        }
        let bytes = directory
            .get(offset..offset + length)
            .ok_or(IsoReadError::Record("a record runs past its directory"))?;
        offset += length;
        let record = Record::parse(bytes).ok_or(IsoReadError::Record("a short record"))?;
        if record.is_directory {
            continue; // `.`, `..` and subdirectories: the root's files are what is read
        }
        if files.len() == MAX_FILES {
            return Err(IsoReadError::TooManyFiles);
        }
        if record.size as usize > MAX_FILE_BYTES {
            return Err(IsoReadError::FileTooLarge(record.size));
        }
        let name = record.name()?;
        if files.iter().any(|f| f.name == name) {
            return Err(IsoReadError::DuplicateName(name));
        }
        let contents = extent(image, record.extent, record.size as usize)?.to_vec();
        files.push(IsoEntry { name, contents });
    }
    Ok(files)
}

/// A directory record (ECMA-119 9.1), its fields read from the little-endian halves.
struct Record<'a> {
    extent: u32,
    size: u32,
    is_directory: bool,
    identifier: &'a [u8],
    system_use: &'a [u8],
}

impl<'a> Record<'a> {
    fn parse(bytes: &'a [u8]) -> Option<Self> {
        let length = usize::from(*bytes.first()?);
        let bytes = bytes.get(..length)?;
        let name_len = usize::from(*bytes.get(32)?);
        let identifier = bytes.get(33..33 + name_len)?;
        // A padding byte follows an even-length identifier.
        let system_start = 33 + name_len + usize::from(name_len % 2 == 0);
        Some(Record {
            extent: u32::from_le_bytes(bytes.get(2..6)?.try_into().ok()?),
            size: u32::from_le_bytes(bytes.get(10..14)?.try_into().ok()?),
            is_directory: bytes.get(25)? & 2 != 0,
            identifier,
            system_use: bytes.get(system_start..).unwrap_or_default(),
        })
    }

    /// The Rock Ridge name, else the identifier as Linux maps it.
    fn name(&self) -> Result<String, IsoReadError> {
        let name = match rock_ridge_name(self.system_use) {
            Some(name) => String::from_utf8(name).map_err(|_| IsoReadError::Name)?,
            None => {
                let identifier =
                    std::str::from_utf8(self.identifier).map_err(|_| IsoReadError::Name)?;
                let without_version = identifier.split(';').next().unwrap_or_default();
                without_version
                    .strip_suffix('.')
                    .unwrap_or(without_version)
                    .to_ascii_lowercase()
            }
        };
        if name.is_empty() || name.contains(['/', '\0']) {
            return Err(IsoReadError::Name);
        }
        Ok(name)
    }
}

/// The name the `NM` entries of a system use area spell (IEEE P1282 4.1.4), continued
/// entries joined; `None` without one. Only the record's own area is read (no `CE`).
fn rock_ridge_name(mut area: &[u8]) -> Option<Vec<u8>> {
    let mut name: Option<Vec<u8>> = None;
    while area.len() >= 4 {
        let length = usize::from(area[2]);
        if length < 4 || length > area.len() {
            break; // padding or a malformed entry: what was read so far stands
        }
        let (entry, rest) = area.split_at(length);
        if &entry[..2] == b"NM" && length >= 5 {
            let flags = entry[4];
            // CURRENT / PARENT flags name `.` and `..`, which are not files.
            if flags & 0b110 == 0 {
                name.get_or_insert_with(Vec::new)
                    .extend_from_slice(&entry[5..]);
            }
        }
        if &entry[..2] == b"ST" {
            break;
        }
        area = rest;
    }
    name
}

#[cfg(test)]
#[path = "iso9660_tests.rs"]
mod tests;
