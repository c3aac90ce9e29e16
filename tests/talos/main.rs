//! Talos foundations judged from outside: the NoCloud `cidata` image capstan writes, read by
//! GNU xorriso; the secrets bundle the daemon generates, its certificates checked by openssl
//! and the machine configs rendered from it by Talos's published schema.

#[path = "../support/judges.rs"]
mod judges;

mod cidata;
