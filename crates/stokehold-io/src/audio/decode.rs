//! Probing and decoding through symphonia: the container is recognised from its bytes (WAV,
//! FLAC, MP3, Ogg), its first audio track is decoded to planar `f32`, and a window of frames can
//! be read without decoding what comes before it (the reader seeks; WAV and FLAC land exactly,
//! MP3 and Vorbis on the packet before and the rest is discarded).
//!
//! Decoding is strict: a packet that does not decode, a read past the end of the data, or fewer
//! frames than a WAV or FLAC header promises is an error naming the file and the byte offset the
//! reader had reached, never a shorter clip returned in silence.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use stokehold_core::{Error, Result};
use symphonia::core::audio::GenericAudioBufferRef;
use symphonia::core::codecs::audio::well_known as codec_ids;
use symphonia::core::codecs::audio::{AudioCodecId, AudioCodecParameters, AudioDecoderOptions};
use symphonia::core::errors::Error as SymError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, FormatReader, SeekMode, SeekTo, TrackType};
use symphonia::core::io::{MediaSource, MediaSourceStream};
use symphonia::core::meta::MetadataOptions;
use symphonia::core::units::{TimeBase, Timestamp};

/// What a file holds, from its headers (nothing decoded).
#[derive(Clone, Debug, PartialEq)]
pub struct AudioInfo {
    /// The container: `wav`, `flac`, `mp3` or `ogg`.
    pub format: String,
    /// The codec: `pcm_s16le`, `flac`, `mp3`, `vorbis`, ... (as symphonia names it).
    pub codec: String,
    /// Frames per second.
    pub sample_rate: u32,
    /// Channels per frame.
    pub channels: usize,
    /// Frames in the track, where the headers say (WAV, FLAC, Ogg, MP3 with a Xing/LAME header).
    pub frames: Option<u64>,
    /// Bits per sample of the source, where it has one (PCM, FLAC).
    pub bits_per_sample: Option<u32>,
}

impl AudioInfo {
    /// Seconds of audio, where the frame count is known.
    pub fn duration(&self) -> Option<f64> {
        self.frames.map(|f| f as f64 / self.sample_rate as f64)
    }
}

/// Decoded audio: one `Vec<f32>` per channel (all the same length), in `[-1, 1]` for integer
/// sources (a sample divided by 2^(bits-1), so 16- and 24-bit samples are exact).
#[derive(Clone, Debug, PartialEq)]
pub struct Audio {
    /// Frames per second.
    pub sample_rate: u32,
    /// The samples, planar: `channels[c][t]`.
    pub channels: Vec<Vec<f32>>,
}

impl Audio {
    /// Frames per channel.
    pub fn frames(&self) -> usize {
        self.channels.first().map_or(0, Vec::len)
    }
}

/// A media source that records how far the reader has read, so errors can name a byte offset.
struct Tracked<R> {
    inner: R,
    len: Option<u64>,
    pos: Arc<AtomicU64>,
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl<R: Seek> Seek for Tracked<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let p = self.inner.seek(to)?;
        self.pos.store(p, Ordering::Relaxed);
        Ok(p)
    }
}

impl<R: Read + Seek + Send + Sync> MediaSource for Tracked<R> {
    fn is_seekable(&self) -> bool {
        true
    }
    fn byte_len(&self) -> Option<u64> {
        self.len
    }
}

/// An opened track: the demuxer, its decoder and what the headers said.
pub struct Opened {
    reader: Box<dyn FormatReader>,
    params: AudioCodecParameters,
    track_id: u32,
    info: AudioInfo,
    /// Whether timestamps count frames (time base 1/rate): only then can we seek by frame.
    ts_are_frames: bool,
    /// Whether the header's frame count is exact, so fewer frames means a truncated file: WAV,
    /// FLAC (STREAMINFO), Ogg (the last page's granule) and MP3 with a LAME header; an MP3
    /// without one has only an estimate from its bitrate.
    exact_length: bool,
    name: PathBuf,
    pos: Arc<AtomicU64>,
}

/// Opens audio held in memory; `name` (a path, or a label such as `<element 3>`) names it in
/// errors.
pub fn open_bytes(data: Bytes, name: &Path) -> Result<Opened> {
    let len = data.len() as u64;
    let head = data.slice(..data.len().min(crate::sniff::HEAD_LEN));
    open_source(std::io::Cursor::new(data), Some(len), name, &|| {
        head.to_vec()
    })
}

/// Opens the audio file at `path` (read as the decoder asks, so a window read touches only the
/// bytes it needs).
pub fn open_file(path: &Path) -> Result<Opened> {
    let (f, len) = crate::storage::open_regular(path)?;
    open_source(f, Some(len), path, &|| crate::sniff::head_of(path))
}

/// `head` gives the source's first bytes, read only when the probe fails: an error for a file
/// that is not audio at all says what it looks like (a `.npy` array, an image...).
fn open_source<R: Read + Seek + Send + Sync + 'static>(
    inner: R,
    len: Option<u64>,
    name: &Path,
    head: &dyn Fn() -> Vec<u8>,
) -> Result<Opened> {
    let pos = Arc::new(AtomicU64::new(0));
    let src = Tracked {
        inner,
        len,
        pos: pos.clone(),
    };
    let fail = |e: SymError| {
        let mut err = corrupt(name, &pos, "not a readable audio file", e);
        let file = name.file_name().unwrap_or_default().to_string_lossy();
        let guess = crate::sniff::guess(&file, &head());
        if let (Error::Corrupt { reason, .. }, Some(g)) = (&mut err, guess) {
            if g.read_with != crate::sniff::READ_AUDIO {
                reason.push_str(&format!("; {g}"));
            }
        }
        err
    };
    let mss = MediaSourceStream::new(Box::new(src), Default::default());
    let reader = symphonia::default::get_probe()
        .probe(
            &Hint::new(),
            mss,
            FormatOptions::default(),
            MetadataOptions::default(),
        )
        .map_err(fail)?;
    let track = reader.default_track(TrackType::Audio).ok_or_else(|| {
        Error::corrupt(
            name,
            0,
            "no audio track (WAV, FLAC, MP3 and Ogg Vorbis are read)",
        )
    })?;
    let params = track
        .codec_params
        .as_ref()
        .and_then(|p| p.audio())
        .ok_or_else(|| Error::corrupt(name, 0, "the audio track has no codec parameters"))?
        .clone();
    // symphonia calls WAV "wave"; we use the file extension people know.
    let short = match reader.format_info().short_name {
        "wave" => "wav",
        other => other,
    };
    let codec = codec_name(params.codec);
    if symphonia::default::get_codecs()
        .get_audio_decoder(params.codec)
        .is_none()
    {
        return Err(Error::corrupt(
            name,
            0,
            format!(
                "unsupported codec {codec} in a {short} container (stokehold decodes PCM, FLAC, \
                 MP3 and Vorbis)"
            ),
        ));
    }
    let sample_rate = params
        .sample_rate
        .filter(|r| *r > 0)
        .ok_or_else(|| Error::corrupt(name, 0, "the header gives no sample rate"))?;
    let channels = params.channels.as_ref().map_or(0, |c| c.count());
    if channels == 0 {
        return Err(Error::corrupt(name, 0, "the header gives no channels"));
    }
    let ts_are_frames = track
        .time_base
        .is_none_or(|tb| Some(tb) == TimeBase::try_from_recip(sample_rate));
    let info = AudioInfo {
        format: short.to_string(),
        codec,
        sample_rate,
        channels,
        frames: track.num_frames,
        bits_per_sample: params.bits_per_sample,
    };
    let exact_length = match short {
        "wav" | "flac" | "ogg" => true,
        _ => track.delay.is_some(),
    };
    let track_id = track.id;
    Ok(Opened {
        exact_length,
        reader,
        params,
        track_id,
        info,
        ts_are_frames,
        name: name.to_path_buf(),
        pos,
    })
}

/// A readable name for a codec: the decoder's own where one is built in.
fn codec_name(id: AudioCodecId) -> String {
    if let Some(d) = symphonia::default::get_codecs().get_audio_decoder(id) {
        return d.codec.info.short_name.to_string();
    }
    let known = [
        (codec_ids::CODEC_ID_OPUS, "opus"),
        (codec_ids::CODEC_ID_AAC, "aac"),
        (codec_ids::CODEC_ID_ALAC, "alac"),
        (codec_ids::CODEC_ID_ADPCM_MS, "adpcm_ms"),
        (codec_ids::CODEC_ID_ADPCM_IMA_WAV, "adpcm_ima_wav"),
        (codec_ids::CODEC_ID_MP1, "mp1"),
        (codec_ids::CODEC_ID_MP2, "mp2"),
    ];
    known
        .iter()
        .find(|(k, _)| *k == id)
        .map_or_else(|| format!("(id {id})"), |(_, n)| n.to_string())
}

/// A corrupt-data error at the reader's position.
fn corrupt(name: &Path, pos: &AtomicU64, what: &str, e: SymError) -> Error {
    let why = match &e {
        SymError::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the data ends early (truncated file?)".to_string()
        }
        other => other.to_string(),
    };
    Error::corrupt(name, pos.load(Ordering::Relaxed), format!("{what}: {why}"))
}

impl Opened {
    /// What the headers say.
    pub fn info(&self) -> &AudioInfo {
        &self.info
    }

    /// Decodes `len` frames (all to the end with `None`) from frame `start`. Fewer come back
    /// only where the clip ends first; a window that starts past the end is an error.
    pub fn decode(mut self, start: u64, len: Option<u64>) -> Result<Audio> {
        let end = len.map(|l| start.saturating_add(l));
        if let Some(total) = self.info.frames {
            if start >= total && start > 0 {
                return Err(Error::corrupt(
                    &self.name,
                    0,
                    format!(
                        "the window starts at frame {start}, past the clip's end ({total} frames)"
                    ),
                ));
            }
        }
        // A whole FLAC stream is checked against its MD5 (its frames carry only a header CRC,
        // so a damaged frame body would otherwise decode to wrong samples without a word).
        let whole = start == 0 && len.is_none();
        let mut decoder = symphonia::default::get_codecs()
            .make_audio_decoder(&self.params, &AudioDecoderOptions::default().verify(whole))
            .map_err(|e| self.fail("cannot start the decoder", e))?;
        // A frame counter for formats whose timestamps are not frames (none of ours today).
        let mut next: i64 = 0;
        if start > 0 && self.ts_are_frames {
            self.seek(start.saturating_sub(self.preroll()));
        }
        let cap = match (len, self.info.frames) {
            (Some(l), _) => l,
            (None, Some(t)) => t.saturating_sub(start),
            _ => 0,
        };
        // The capacity is a hint from a header we have not checked yet: reserve at most 2^20
        // frames (4 MiB) per channel up front; longer clips grow as they decode.
        let cap = cap.min(1 << 20) as usize;
        let mut out: Vec<Vec<f32>> = vec![Vec::with_capacity(cap); self.info.channels];
        let mut decoded_to: u64 = 0;
        loop {
            // A stream with no length in its header grows as it decodes: stop at the ceiling.
            let held = out.first().map_or(0, Vec::len).saturating_mul(out.len());
            if held.saturating_mul(4) > stokehold_core::alloc::element_ceiling() {
                let ceiling = stokehold_core::alloc::element_ceiling();
                return Err(Error::corrupt(
                    &self.name,
                    self.pos.load(Ordering::Relaxed),
                    format!(
                        "{held} samples decoded so far pass the {ceiling} bytes one element \
                         may take (stokehold_core::alloc::element_ceiling)"
                    ),
                ));
            }
            let packet = match self.reader.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => return Err(self.fail("cannot read the next packet", e)),
            };
            if packet.track_id != self.track_id {
                continue;
            }
            // The first valid frame of the packet: decoders drop `trim_start` frames of encoder
            // delay from its front.
            let first = if self.ts_are_frames {
                packet.pts.get() + packet.trim_start.get() as i64
            } else {
                next
            };
            if end.is_some_and(|e| first >= e as i64) {
                break;
            }
            let buf = match decoder.decode(&packet) {
                Ok(b) => b,
                Err(e) => return Err(corrupt(&self.name, &self.pos, "bad packet", e)),
            };
            let frames = buf.frames() as i64;
            next = first + frames;
            decoded_to = decoded_to.max(next.max(0) as u64);
            let lo = (start as i64 - first).clamp(0, frames) as usize;
            let hi = end.map_or(frames, |e| (e as i64 - first).clamp(0, frames)) as usize;
            if lo < hi {
                append(&buf, lo, hi, &mut out).map_err(|why| {
                    Error::corrupt(&self.name, self.pos.load(Ordering::Relaxed), why)
                })?;
            }
        }
        self.check_complete(decoded_to, end)?;
        if whole && decoder.finalize().verify_ok == Some(false) {
            return Err(Error::corrupt(
                &self.name,
                0,
                "the decoded samples do not match the stream's MD5 checksum (a damaged frame)",
            ));
        }
        Ok(Audio {
            sample_rate: self.info.sample_rate,
            channels: out,
        })
    }

    /// Seeks to just before frame `start`. Where the format cannot, the frames before it are
    /// decoded and dropped instead (timestamps still place them).
    fn seek(&mut self, start: u64) {
        let Ok(ts) = i64::try_from(start) else {
            return;
        };
        let to = SeekTo::Timestamp {
            ts: Timestamp::new(ts),
            track_id: self.track_id,
        };
        // The decoder is made after the seek, so it starts clean.
        let _ = self.reader.seek(SeekMode::Accurate, to);
    }

    /// Frames to decode and drop before a window: lossy codecs need the packets before the
    /// window to rebuild its first samples (MP3's bit reservoir and MDCT overlap reach about two
    /// 1152-frame frames back; a Vorbis block is at most 8192 frames), lossless ones nothing.
    fn preroll(&self) -> u64 {
        match self.info.format.as_str() {
            "wav" | "flac" => 0,
            "mp3" => 3 * 1152,
            _ => 8192,
        }
    }

    /// Fewer frames than an exact header promises is a truncated file.
    fn check_complete(&self, decoded_to: u64, end: Option<u64>) -> Result<()> {
        let Some(total) = self.info.frames.filter(|_| self.exact_length) else {
            return Ok(());
        };
        let want = end.map_or(total, |e| e.min(total));
        if decoded_to < want {
            return Err(Error::corrupt(
                &self.name,
                self.pos.load(Ordering::Relaxed),
                format!(
                    "truncated: the header promises {total} frames, the data ends after \
                     {decoded_to}"
                ),
            ));
        }
        Ok(())
    }

    fn fail(&self, what: &str, e: SymError) -> Error {
        corrupt(&self.name, &self.pos, what, e)
    }
}

/// Appends frames `lo..hi` of `buf`, converted to `f32`, to the planar output.
fn append(
    buf: &GenericAudioBufferRef<'_>,
    lo: usize,
    hi: usize,
    out: &mut [Vec<f32>],
) -> std::result::Result<(), String> {
    if buf.num_planes() != out.len() {
        return Err(format!(
            "the channel count changed mid-stream ({} -> {})",
            out.len(),
            buf.num_planes()
        ));
    }
    let n = hi - lo;
    let mut tails: Vec<&mut [f32]> = out
        .iter_mut()
        .map(|v| {
            let at = v.len();
            v.resize(at + n, 0.0);
            &mut v[at..]
        })
        .collect();
    buf.slice(lo..hi).copy_to_slice_planar(&mut tails);
    Ok(())
}

/// Reads the headers of audio held in memory.
pub fn probe_bytes(data: Bytes, name: &Path) -> Result<AudioInfo> {
    Ok(open_bytes(data, name)?.info)
}

/// Reads the headers of the audio file at `path`.
pub fn probe_file(path: &Path) -> Result<AudioInfo> {
    Ok(open_file(path)?.info)
}

/// Decodes all of the audio held in `data`.
pub fn decode_bytes(data: Bytes, name: &Path) -> Result<Audio> {
    open_bytes(data, name)?.decode(0, None)
}
