//! `stokehold inspect` on audio files: format, codec, sample rate, channels, bits, frames and
//! duration, from the headers alone (see [`stokehold_io::audio::probe_file`]).

use std::io::Read;
use std::path::Path;

#[cfg(feature = "audio")]
use anyhow::Context;
#[cfg(feature = "audio")]
use stokehold_io::audio::{decode_bytes, probe_file};
#[cfg(feature = "audio")]
use stokehold_io::units::count;

/// True when `path` looks like audio: a known extension, or the first bytes of a WAV, FLAC, Ogg
/// or ID3-tagged MP3 file (TFRecord files never start with these).
pub fn is_audio(path: &Path) -> bool {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    if matches!(
        ext.as_str(),
        "wav" | "wave" | "flac" | "mp3" | "ogg" | "oga"
    ) {
        return true;
    }
    let mut head = [0u8; 12];
    let n = stokehold_io::storage::open_regular(path)
        .ok()
        .and_then(|(mut f, _)| f.read(&mut head).ok())
        .unwrap_or(0);
    let head = &head[..n];
    (head.starts_with(b"RIFF") && head.get(8..12) == Some(b"WAVE"))
        || head.starts_with(b"fLaC")
        || head.starts_with(b"OggS")
        || head.starts_with(b"ID3")
}

/// Prints what the headers of the audio file at `path` say.
#[cfg(feature = "audio")]
pub fn inspect(path: &Path) -> anyhow::Result<()> {
    let i = probe_file(path).with_context(|| format!("inspecting {}", path.display()))?;
    println!("{} (audio)", path.display());
    let channels = count(i.channels as u64, "channel");
    let bits = i
        .bits_per_sample
        .map(|b| format!(", {b}-bit"))
        .unwrap_or_default();
    println!(
        "  format {}, codec {}, {} Hz, {channels}{bits}",
        i.format, i.codec, i.sample_rate
    );
    match (i.frames, i.duration()) {
        (Some(f), Some(d)) => println!("  {}, duration {d:.3} s", count(f, "frame")),
        _ => println!("  duration unknown (the headers give no frame count)"),
    }
    Ok(())
}

/// `stokehold verify` on an audio file: decodes every frame (a corrupt frame is an error naming
/// the file).
#[cfg(feature = "audio")]
pub fn verify(path: &Path) -> anyhow::Result<String> {
    let data = stokehold_io::storage::read(path)?;
    let a = decode_bytes(data, path)?;
    Ok(format!(
        "ok, {} decoded ({} Hz, {})",
        count(a.frames() as u64, "frame"),
        a.sample_rate,
        count(a.channels.len() as u64, "channel")
    ))
}

/// Without the `audio` feature: an error saying how to get the full command.
#[cfg(not(feature = "audio"))]
pub fn inspect(path: &Path) -> anyhow::Result<()> {
    Err(super::not_built(path, "audio", "audio"))
}

/// Without the `audio` feature: an error saying how to get the full command.
#[cfg(not(feature = "audio"))]
pub fn verify(path: &Path) -> anyhow::Result<String> {
    Err(super::not_built(path, "audio", "audio"))
}
