//! A small ISO 9660 writer (pure): one root directory of a few small files, with Rock Ridge
//! names, as Proxmox VE writes its own cloud-init drives (`genisoimage -R`). Enough for a
//! NoCloud `cidata` volume and nothing more: no subdirectories, no Joliet, no El Torito.
//!
//! Layout, in 2,048-byte sectors: 0–15 the empty system area, 16 the primary volume
//! descriptor, 17 the set terminator, 18 and 19 the path tables (little- and big-endian), 20
//! the root directory, 21 the continuation of its Rock Ridge entries, then each file from its
//! own sector. Each file's ISO 9660 name is its
//! name in d-characters (`USER_DATA.;1`); its Rock Ridge `NM` entry carries the real one
//! (`user-data`), which Linux, Talos and xorriso read. The same files make the same bytes: no
//! clock is read (dates are "not specified" and the Unix epoch).

use std::fmt;

/// A logical sector.
pub const SECTOR: usize = 2048;
/// The largest file the writer takes: a machine config is tens of KiB, so 4 MiB leaves room
/// for inline manifests while keeping the image (held in memory, uploaded whole) bounded.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// The most files in the one directory (all its records must fit its one sector).
pub const MAX_FILES: usize = 8;
/// The longest file name (a Rock Ridge name and its ISO 9660 form both stay short).
pub const MAX_NAME_BYTES: usize = 30;

const ROOT_DIRECTORY_SECTOR: u32 = 20;
/// Where the root's `ER` entry continues: a directory record has at most 255 bytes, too few
/// for `SP`, `PX` and the 237-byte `ER` together.
const CONTINUATION_SECTOR: u32 = 21;
const FIRST_FILE_SECTOR: u32 = 22;

/// Files an image cannot be made of.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsoProblem {
    /// The volume id is not 1 to 32 letters, digits or `_`.
    #[error("the volume id `{0}` is not 1 to 32 letters, digits or `_`")]
    VolumeId(String),
    /// A file name is not 1 to 30 lowercase letters, digits, `-`, `_` or `.`.
    #[error("the file name `{0}` is not 1 to 30 lowercase letters, digits, `-`, `_` or `.`")]
    FileName(String),
    /// Two files have the same name (or the same ISO 9660 form of it).
    #[error("two files are named `{0}`")]
    DuplicateName(String),
    /// A file is larger than [`MAX_FILE_BYTES`].
    #[error("the file `{name}` has {size} bytes; at most {MAX_FILE_BYTES} are written")]
    FileTooLarge {
        /// Its name.
        name: String,
        /// Its size.
        size: usize,
    },
    /// More than [`MAX_FILES`] files.
    #[error("{0} files; at most {MAX_FILES} are written")]
    TooManyFiles(usize),
}

/// One file of the image.
#[derive(Clone, PartialEq, Eq)]
pub struct IsoFile<'a> {
    /// Its name in the root directory (`user-data`).
    pub name: &'a str,
    /// Its contents.
    pub contents: &'a [u8],
}

impl fmt::Debug for IsoFile<'_> {
    // A file may hold secrets (a machine config does): show its size, never its bytes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IsoFile({}, {} bytes)", self.name, self.contents.len())
    }
}

/// An ISO 9660 image with volume id `volume_id` holding `files` in its root directory.
///
/// # Errors
///
/// [`IsoProblem`] for a volume id or a name it cannot write, or sizes past its bounds.
pub fn write_image(volume_id: &str, files: &[IsoFile<'_>]) -> Result<Vec<u8>, IsoProblem> {
    let volume_ok = (1..=32).contains(&volume_id.len())
        && volume_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !volume_ok {
        return Err(IsoProblem::VolumeId(volume_id.to_owned()));
    }
    if files.len() > MAX_FILES {
        return Err(IsoProblem::TooManyFiles(files.len()));
    }
    let mut entries: Vec<(Vec<u8>, &IsoFile<'_>)> = Vec::with_capacity(files.len());
    for file in files {
        let name_ok = (1..=MAX_NAME_BYTES).contains(&file.name.len())
            && file.name.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
            })
            && !file.name.starts_with('.');
        if !name_ok {
            return Err(IsoProblem::FileName(file.name.to_owned()));
        }
        if file.contents.len() > MAX_FILE_BYTES {
            return Err(IsoProblem::FileTooLarge {
                name: file.name.to_owned(),
                size: file.contents.len(),
            });
        }
        let iso_name = iso_name(file.name);
        if entries.iter().any(|(other, _)| *other == iso_name) {
            return Err(IsoProblem::DuplicateName(file.name.to_owned()));
        }
        entries.push((iso_name, file));
    }
    // ECMA-119 9.3: a directory's records are in the order of their identifiers.
    entries.sort_by(|a, b| a.0.cmp(&b.0));

    let mut extents = Vec::with_capacity(entries.len());
    let mut next = FIRST_FILE_SECTOR;
    for (_, file) in &entries {
        extents.push(next);
        next += sectors(file.contents.len());
    }
    let total_sectors = next;

    let mut directory = Vec::with_capacity(SECTOR);
    let extension_reference = susp_er();
    let dot_system_use = [
        susp_sp(),
        rr_rr(RR_HAS_PX),
        rrip_px(DIRECTORY_MODE, 2),
        susp_ce(CONTINUATION_SECTOR, extension_reference.len()),
    ]
    .concat();
    let root_size = SECTOR as u32;
    directory.extend(directory_record(
        ROOT_DIRECTORY_SECTOR,
        root_size,
        true,
        &[0],
        &dot_system_use,
    ));
    let dotdot_system_use = [rr_rr(RR_HAS_PX), rrip_px(DIRECTORY_MODE, 2)].concat();
    directory.extend(directory_record(
        ROOT_DIRECTORY_SECTOR,
        root_size,
        true,
        &[1],
        &dotdot_system_use,
    ));
    for ((iso_name, file), extent) in entries.iter().zip(&extents) {
        let system_use = [
            rr_rr(RR_HAS_PX | RR_HAS_NM),
            rrip_px(FILE_MODE, 1),
            rrip_nm(file.name),
        ]
        .concat();
        let size = u32::try_from(file.contents.len()).expect("bounded by MAX_FILE_BYTES");
        directory.extend(directory_record(
            *extent,
            size,
            false,
            iso_name,
            &system_use,
        ));
    }
    assert!(
        directory.len() <= SECTOR,
        "MAX_FILES records of MAX_NAME_BYTES names fit one sector"
    );

    let mut image = vec![0u8; total_sectors as usize * SECTOR];
    put(
        &mut image,
        16,
        &primary_volume_descriptor(volume_id, total_sectors),
    );
    put(&mut image, 17, &terminator());
    let path_table_le = path_table_record(ROOT_DIRECTORY_SECTOR.to_le_bytes(), 1u16.to_le_bytes());
    let path_table_be = path_table_record(ROOT_DIRECTORY_SECTOR.to_be_bytes(), 1u16.to_be_bytes());
    put(&mut image, 18, &path_table_le);
    put(&mut image, 19, &path_table_be);
    put(&mut image, ROOT_DIRECTORY_SECTOR, &directory);
    put(&mut image, CONTINUATION_SECTOR, &extension_reference);
    for ((_, file), extent) in entries.iter().zip(&extents) {
        put(&mut image, *extent, file.contents);
    }
    Ok(image)
}

/// `user-data` → `USER_DATA.;1`: d-characters, a dot (a file name has one), version 1.
fn iso_name(name: &str) -> Vec<u8> {
    let upper: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' => c.to_ascii_uppercase(),
            '0'..='9' | '.' => c,
            _ => '_',
        })
        .collect();
    let with_dot = match upper.rsplit_once('.') {
        Some((stem, extension)) => format!("{}.{extension}", stem.replace('.', "_")),
        None => format!("{upper}."),
    };
    format!("{with_dot};1").into_bytes()
}

fn sectors(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(SECTOR)).expect("bounded by MAX_FILE_BYTES")
}

fn put(image: &mut [u8], sector: u32, bytes: &[u8]) {
    let start = sector as usize * SECTOR;
    image[start..start + bytes.len()].copy_from_slice(bytes);
}

fn both_endian_32(value: u32) -> [u8; 8] {
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&value.to_le_bytes());
    out[4..].copy_from_slice(&value.to_be_bytes());
    out
}

fn both_endian_16(value: u16) -> [u8; 4] {
    let mut out = [0u8; 4];
    out[..2].copy_from_slice(&value.to_le_bytes());
    out[2..].copy_from_slice(&value.to_be_bytes());
    out
}

/// The Unix epoch as a directory record's date: no clock is read.
const RECORDING_DATE: [u8; 7] = [70, 1, 1, 0, 0, 0, 0];

/// A directory record (ECMA-119 9.1), padded to an even length.
fn directory_record(
    extent: u32,
    size: u32,
    is_directory: bool,
    name: &[u8],
    system_use: &[u8],
) -> Vec<u8> {
    let mut record = vec![0u8; 33];
    record[2..10].copy_from_slice(&both_endian_32(extent));
    record[10..18].copy_from_slice(&both_endian_32(size));
    record[18..25].copy_from_slice(&RECORDING_DATE);
    record[25] = if is_directory { 2 } else { 0 };
    record[28..32].copy_from_slice(&both_endian_16(1));
    record[32] = u8::try_from(name.len()).expect("names are short");
    record.extend_from_slice(name);
    if name.len().is_multiple_of(2) {
        record.push(0);
    }
    record.extend_from_slice(system_use);
    if record.len() % 2 == 1 {
        record.push(0);
    }
    record[0] = u8::try_from(record.len()).expect("a record stays under 256 bytes");
    record
}

fn path_table_record(extent: [u8; 4], parent: [u8; 2]) -> [u8; 10] {
    let mut record = [0u8; 10];
    record[0] = 1;
    record[2..6].copy_from_slice(&extent);
    record[6..8].copy_from_slice(&parent);
    record
}

/// "Not specified" (ECMA-119 8.4.26.1): sixteen `0` digits and a zero offset.
fn unspecified_date() -> [u8; 17] {
    let mut date = [b'0'; 17];
    date[16] = 0;
    date
}

fn padded<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [b' '; N];
    out[..text.len()].copy_from_slice(text.as_bytes());
    out
}

fn primary_volume_descriptor(volume_id: &str, total_sectors: u32) -> Vec<u8> {
    let mut pvd = vec![0u8; SECTOR];
    pvd[0] = 1;
    pvd[1..6].copy_from_slice(b"CD001");
    pvd[6] = 1;
    pvd[8..40].copy_from_slice(&padded::<32>(""));
    pvd[40..72].copy_from_slice(&padded::<32>(volume_id));
    pvd[80..88].copy_from_slice(&both_endian_32(total_sectors));
    pvd[120..124].copy_from_slice(&both_endian_16(1));
    pvd[124..128].copy_from_slice(&both_endian_16(1));
    pvd[128..132].copy_from_slice(&both_endian_16(SECTOR as u16));
    pvd[132..140].copy_from_slice(&both_endian_32(10));
    pvd[140..144].copy_from_slice(&18u32.to_le_bytes());
    pvd[148..152].copy_from_slice(&19u32.to_be_bytes());
    let root = directory_record(ROOT_DIRECTORY_SECTOR, SECTOR as u32, true, &[0], &[]);
    pvd[156..156 + root.len()].copy_from_slice(&root);
    pvd[190..318].copy_from_slice(&padded::<128>(""));
    pvd[318..446].copy_from_slice(&padded::<128>(""));
    pvd[446..574].copy_from_slice(&padded::<128>(""));
    pvd[574..702].copy_from_slice(&padded::<128>("CAPSTAN"));
    pvd[702..813].copy_from_slice(&padded::<111>(""));
    for field in [813, 830, 847, 864] {
        pvd[field..field + 17].copy_from_slice(&unspecified_date());
    }
    pvd[881] = 1;
    pvd
}

fn terminator() -> Vec<u8> {
    let mut descriptor = vec![0u8; SECTOR];
    descriptor[0] = 255;
    descriptor[1..6].copy_from_slice(b"CD001");
    descriptor[6] = 1;
    descriptor
}

const DIRECTORY_MODE: u32 = 0o040_555;
const FILE_MODE: u32 = 0o100_444;
const RR_HAS_PX: u8 = 0x01;
const RR_HAS_NM: u8 = 0x08;

/// SUSP's `SP`: the root's `.` record says the System Use areas hold SUSP entries.
fn susp_sp() -> Vec<u8> {
    vec![b'S', b'P', 7, 1, 0xBE, 0xEF, 0]
}

/// SUSP's `CE`: the System Use area goes on in sector `sector`, for `length` bytes.
fn susp_ce(sector: u32, length: usize) -> Vec<u8> {
    let mut entry = vec![b'C', b'E', 28, 1];
    entry.extend_from_slice(&both_endian_32(sector));
    entry.extend_from_slice(&both_endian_32(0));
    entry.extend_from_slice(&both_endian_32(
        u32::try_from(length).expect("one short entry"),
    ));
    entry
}

/// SUSP's `ER`: the extension in use is Rock Ridge (RRIP 1.10's identifier).
fn susp_er() -> Vec<u8> {
    const ID: &[u8] = b"RRIP_1991A";
    const DESCRIPTION: &[u8] =
        b"THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
    const SOURCE: &[u8] = b"PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION.";
    let length = 8 + ID.len() + DESCRIPTION.len() + SOURCE.len();
    let mut entry = vec![
        b'E',
        b'R',
        u8::try_from(length).expect("fixed text under 256 bytes"),
        1,
        ID.len() as u8,
        DESCRIPTION.len() as u8,
        SOURCE.len() as u8,
        1,
    ];
    entry.extend_from_slice(ID);
    entry.extend_from_slice(DESCRIPTION);
    entry.extend_from_slice(SOURCE);
    entry
}

/// RRIP 1.09's `RR`: which Rock Ridge entries follow (older readers look for it).
fn rr_rr(flags: u8) -> Vec<u8> {
    vec![b'R', b'R', 5, 1, flags]
}

/// RRIP's `PX`: POSIX mode and link count, owned by root.
fn rrip_px(mode: u32, links: u32) -> Vec<u8> {
    let mut entry = vec![b'P', b'X', 36, 1];
    entry.extend_from_slice(&both_endian_32(mode));
    entry.extend_from_slice(&both_endian_32(links));
    entry.extend_from_slice(&both_endian_32(0));
    entry.extend_from_slice(&both_endian_32(0));
    entry
}

/// RRIP's `NM`: the file's real name.
fn rrip_nm(name: &str) -> Vec<u8> {
    let mut entry = vec![
        b'N',
        b'M',
        u8::try_from(5 + name.len()).expect("short name"),
        1,
        0,
    ];
    entry.extend_from_slice(name.as_bytes());
    entry
}

#[cfg(test)]
mod tests;
