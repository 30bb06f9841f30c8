//! The image container formats stokehold decodes, recognised by their signatures.

/// An image container format, recognised by its signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JPEG (JFIF / Exif), baseline or progressive.
    Jpeg,
    /// PNG.
    Png,
    /// WebP (RIFF), lossy or lossless.
    WebP,
}

impl Format {
    /// The format's usual name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Jpeg => "JPEG",
            Format::Png => "PNG",
            Format::WebP => "WebP",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
