//! Arrays as pictures (`remora run … --output picture.png`): a `[h w]`
//! array of Int, Float or Bool is a grayscale image, a `[h w 3]` array an
//! RGB one; written as PNG (by the `png` crate) or as binary PGM (`P5`,
//! grayscale) or PPM (`P6`, RGB), 8 bits a channel.
//!
//! * `[h w]`: scaled linearly so that its smallest value is black and its
//!   largest white (NaN is black; infinities are left out of the range and
//!   clamp; an image of one value is all black), or from a given range
//!   `lo..hi` (values outside it clamp). Bool is `#f` black, `#t` white. A
//!   [`Colormap`] turns the scaled values into colours (RGB).
//! * `[h w 3]`: red, green, blue. Float channels are in `[0, 1]`, Int in
//!   `[0, 255]`, Bool `#f` 0 and `#t` full; each is clamped (NaN is 0), or
//!   scaled from a given range as above.

use crate::{Array, Data};
use std::path::Path;

/// The file formats, by extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Png,
    /// Binary PGM (`P5`): grayscale only.
    Pgm,
    /// Binary PPM (`P6`): RGB (a grayscale image is written with three
    /// equal channels).
    Ppm,
}

impl Format {
    /// The image format a file's extension (`.png`, `.pgm`, `.ppm`, in any
    /// case) names, if any.
    pub fn of_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "png" => Some(Format::Png),
            "pgm" => Some(Format::Pgm),
            "ppm" => Some(Format::Ppm),
            _ => None,
        }
    }
}

/// How a scaled value in `[0, 1]` becomes a colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Colormap {
    /// Black to white, as RGB.
    Gray,
    /// Matplotlib's perceptually uniform dark purple → blue → green →
    /// yellow (van der Walt and Smith, CC0), as [`VIRIDIS`].
    Viridis,
}

/// Viridis at 17 evenly spaced points (`k/16`, from matplotlib's 256-entry
/// table), as 8-bit RGB; in between, interpolated linearly.
pub const VIRIDIS: [[u8; 3]; 17] = [
    [68, 1, 84],
    [72, 24, 106],
    [71, 45, 123],
    [66, 64, 134],
    [59, 82, 139],
    [51, 99, 141],
    [44, 114, 142],
    [38, 130, 142],
    [33, 145, 140],
    [31, 159, 136],
    [39, 173, 129],
    [61, 188, 116],
    [92, 200, 99],
    [129, 211, 77],
    [170, 220, 50],
    [213, 226, 26],
    [253, 231, 37],
];

impl Colormap {
    /// The colour of a value scaled to `[0, 1]`.
    pub fn colour(self, t: f64) -> [u8; 3] {
        let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
        match self {
            Colormap::Gray => {
                let g = byte(t * 255.0);
                [g, g, g]
            }
            Colormap::Viridis => {
                let last = VIRIDIS.len() - 1;
                let p = t * last as f64;
                let i = (p.floor() as usize).min(last - 1);
                let f = p - i as f64;
                let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
                [0, 1, 2].map(|c| byte(f64::from(a[c]) + (f64::from(b[c]) - f64::from(a[c])) * f))
            }
        }
    }
}

/// How the values become pixels.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Options {
    /// The values that are black and white (or the ends of the colormap,
    /// or of each RGB channel); default: the image's own range.
    pub range: Option<(f64, f64)>,
    /// Colours for a `[h w]` image (making it RGB).
    pub colormap: Option<Colormap>,
}

/// An 8-bit image: `channels` (1, gray; 3, RGB) bytes a pixel, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    pub width: u32,
    pub height: u32,
    pub channels: u8,
    pub pixels: Vec<u8>,
}

/// A value rounded and clamped to a byte (NaN is 0).
fn byte(v: f64) -> u8 {
    if v.is_nan() {
        0
    } else {
        v.round().clamp(0.0, 255.0) as u8
    }
}

/// Atom `i` as a number (Bool as 0 and 1; a missing one as NaN).
fn number<F>(data: &Data<F>, i: usize) -> f64 {
    match data {
        Data::Int(v) => v.get(i).map_or(f64::NAN, |n| *n as f64),
        Data::Float(v) => v.get(i).map_or(f64::NAN, |x| f64::from(*x)),
        Data::Bool(v) => v.get(i).map_or(f64::NAN, |b| if *b { 1.0 } else { 0.0 }),
        Data::Atoms(_) | Data::Records(_) => f64::NAN,
    }
}

/// `n` pixels of `channels` bytes, each made by `pixel` from its atom.
fn pixels<const C: usize>(n: usize, pixel: impl Fn(usize) -> [u8; C]) -> Result<Vec<u8>, String> {
    let mut out = n
        .checked_mul(C)
        .and_then(crate::limits::try_vec)
        .ok_or_else(|| format!("not enough memory for an image of {n} pixels"))?;
    out.extend((0..n).flat_map(pixel));
    Ok(out)
}

fn shape_text(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", dims.join(" "))
}

/// The pixels of an array, as the module's rules say.
pub fn image<F>(a: &Array<F>, options: &Options) -> Result<Image, String> {
    let (h, w, rgb) = match a.shape.as_slice() {
        [h, w] => (*h, *w, false),
        [h, w, 3] => (*h, *w, true),
        _ => {
            return Err(format!(
                "an image is a [h w] array (grayscale) or a [h w 3] array (RGB), not one of shape {}",
                shape_text(&a.shape)
            ));
        }
    };
    if h == 0 || w == 0 {
        return Err(format!(
            "an image needs at least one row and one column, not shape {}",
            shape_text(&a.shape)
        ));
    }
    let (Ok(height), Ok(width)) = (u32::try_from(h), u32::try_from(w)) else {
        return Err(format!("an image of shape {} is too large", shape_text(&a.shape)));
    };
    if !matches!(a.data, Data::Int(_) | Data::Float(_) | Data::Bool(_)) {
        return Err("an image's pixels must be Int, Float or Bool (not boxes, records or functions)".into());
    }
    let n: usize = h.saturating_mul(w).saturating_mul(if rgb { 3 } else { 1 });
    if a.data.len() != n {
        return Err("the array's atoms do not fill its shape".into());
    }
    if let Some((lo, hi)) = options.range
        && !(lo.is_finite() && hi.is_finite() && lo < hi)
    {
        return Err(format!(
            "--range {lo} {hi}: the low end must be below the high end (finite numbers)"
        ));
    }
    let value = |i: usize| number(&a.data, i);
    let scaled = |v: f64, (lo, hi): (f64, f64)| {
        if v.is_nan() || hi <= lo {
            0.0
        } else {
            ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
        }
    };
    if rgb {
        if options.colormap.is_some() {
            return Err(format!(
                "--colormap colours a [h w] array; this one, of shape {}, is RGB already",
                shape_text(&a.shape)
            ));
        }
        let channel = |i: usize| match (options.range, &a.data) {
            (Some(range), _) => byte(scaled(value(i), range) * 255.0),
            (None, Data::Float(_)) => byte(value(i) * 255.0),
            (None, Data::Bool(_)) => byte(value(i) * 255.0),
            (None, _) => byte(value(i)),
        };
        return Ok(Image {
            width,
            height,
            channels: 3,
            pixels: pixels(n, |i| [channel(i)])?,
        });
    }
    let range = match (options.range, &a.data) {
        (Some(range), _) => range,
        (None, Data::Bool(_)) => (0.0, 1.0),
        (None, _) => (0..n)
            .map(value)
            .filter(|v| v.is_finite())
            .fold(None, |acc: Option<(f64, f64)>, v| match acc {
                None => Some((v, v)),
                Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
            })
            .unwrap_or((0.0, 0.0)),
    };
    Ok(match options.colormap {
        None => Image {
            width,
            height,
            channels: 1,
            pixels: pixels(n, |i| [byte(scaled(value(i), range) * 255.0)])?,
        },
        Some(map) => Image {
            width,
            height,
            channels: 3,
            pixels: pixels(n, |i| map.colour(scaled(value(i), range)))?,
        },
    })
}

/// The image as the bytes of a file of `format`.
pub fn encode(image: &Image, format: Format) -> Result<Vec<u8>, String> {
    let (w, h) = (image.width, image.height);
    match format {
        Format::Pgm if image.channels != 1 => Err(
            "a .pgm image is grayscale: write an RGB image (a [h w 3] array, or --colormap) as .ppm or .png"
                .into(),
        ),
        Format::Pgm => {
            let mut out = format!("P5\n{w} {h}\n255\n").into_bytes();
            out.extend_from_slice(&image.pixels);
            Ok(out)
        }
        Format::Ppm => {
            let mut out = format!("P6\n{w} {h}\n255\n").into_bytes();
            out.try_reserve(image.pixels.len().saturating_mul(3))
                .map_err(|_| "not enough memory for the image".to_string())?;
            if image.channels == 1 {
                out.extend(image.pixels.iter().flat_map(|g| [*g, *g, *g]));
            } else {
                out.extend_from_slice(&image.pixels);
            }
            Ok(out)
        }
        Format::Png => {
            // PNG's own bound on a side.
            if w > i32::MAX as u32 || h > i32::MAX as u32 {
                return Err(format!("a PNG image is at most {} pixels a side", i32::MAX));
            }
            let mut out = Vec::new();
            let mut encoder = png::Encoder::new(&mut out, w, h);
            encoder.set_color(if image.channels == 1 {
                png::ColorType::Grayscale
            } else {
                png::ColorType::Rgb
            });
            encoder.set_depth(png::BitDepth::Eight);
            let failed = |e: png::EncodingError| format!("cannot encode the PNG image: {e}");
            let mut writer = encoder.write_header().map_err(failed)?;
            writer.write_image_data(&image.pixels).map_err(failed)?;
            writer.finish().map_err(failed)?;
            Ok(out)
        }
    }
}

/// The array as the bytes of an image file of `format`.
pub fn write<F>(a: &Array<F>, format: Format, options: &Options) -> Result<Vec<u8>, String> {
    if format == Format::Pgm && options.colormap.is_some_and(|m| m != Colormap::Gray) {
        return Err("a .pgm image is grayscale: write a --colormap image as .ppm or .png".into());
    }
    let mut options = *options;
    if format == Format::Pgm {
        // Gray is what PGM holds anyway.
        options.colormap = None;
    }
    encode(&image(a, &options)?, format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(shape: &[usize], v: &[i64]) -> Array {
        Array {
            shape: shape.to_vec(),
            data: Data::Int(v.to_vec().into()),
        }
    }

    fn floats(shape: &[usize], v: &[f32]) -> Array {
        Array {
            shape: shape.to_vec(),
            data: Data::Float(v.to_vec().into()),
        }
    }

    fn pixels(a: &Array, options: &Options) -> Result<Vec<u8>, String> {
        image(a, options).map(|i| i.pixels)
    }

    #[test]
    fn gray_from_the_smallest_to_the_largest_value() {
        let a = ints(&[2, 3], &[10, 20, 30, 40, 50, 60]);
        assert_eq!(
            pixels(&a, &Options::default()),
            Ok(vec![0, 51, 102, 153, 204, 255])
        );
        let a = floats(&[1, 4], &[f32::NAN, -1.0, 1.0, f32::INFINITY]);
        assert_eq!(pixels(&a, &Options::default()), Ok(vec![0, 0, 255, 255]));
        // One value: all black.
        assert_eq!(
            pixels(&ints(&[2, 2], &[7, 7, 7, 7]), &Options::default()),
            Ok(vec![0; 4])
        );
        let bools = Array {
            shape: vec![1, 2],
            data: Data::Bool(vec![true, true].into()),
        };
        assert_eq!(pixels(&bools, &Options::default()), Ok(vec![255, 255]));
    }

    #[test]
    fn a_given_range_clamps() {
        let a = ints(&[1, 4], &[-5, 0, 50, 500]);
        let options = Options {
            range: Some((0.0, 100.0)),
            colormap: None,
        };
        assert_eq!(pixels(&a, &options), Ok(vec![0, 0, 128, 255]));
        let backwards = Options {
            range: Some((1.0, 1.0)),
            colormap: None,
        };
        assert!(pixels(&a, &backwards).is_err_and(|e| e.contains("--range")));
    }

    #[test]
    fn rgb_from_floats_in_0_1_or_ints_in_0_255() {
        let f = floats(&[1, 2, 3], &[0.0, 0.5, 1.0, 2.0, -1.0, f32::NAN]);
        let image = image(&f, &Options::default());
        assert_eq!(image.as_ref().map(|i| i.channels), Ok(3));
        assert_eq!(image.map(|i| i.pixels), Ok(vec![0, 128, 255, 255, 0, 0]));
        let i = ints(&[1, 1, 3], &[-3, 100, 300]);
        assert_eq!(pixels(&i, &Options::default()), Ok(vec![0, 100, 255]));
    }

    #[test]
    fn viridis_ends_and_middle() {
        assert_eq!(Colormap::Viridis.colour(0.0), [68, 1, 84]);
        assert_eq!(Colormap::Viridis.colour(1.0), [253, 231, 37]);
        assert_eq!(Colormap::Viridis.colour(0.5), [33, 145, 140]);
        assert_eq!(Colormap::Viridis.colour(f64::NAN), [68, 1, 84]);
        assert_eq!(Colormap::Gray.colour(0.5), [128, 128, 128]);
    }

    #[test]
    fn other_shapes_and_atoms_are_errors() {
        for shape in [vec![6], vec![1, 2, 4], vec![1, 1, 2, 3], vec![]] {
            let n = shape.iter().product::<usize>();
            let a = ints(&shape, &vec![0; n]);
            assert!(
                image(&a, &Options::default()).is_err_and(|e| e.starts_with("an image is a [h w] array")),
                "{shape:?}"
            );
        }
        assert!(
            image(&ints(&[0, 3], &[]), &Options::default()).is_err_and(|e| e.contains("at least one row"))
        );
        let boxes: Array = Array {
            shape: vec![1, 1],
            data: Data::Atoms(vec![].into()),
        };
        assert!(image(&boxes, &Options::default()).is_err_and(|e| e.contains("Int, Float or Bool")));
    }

    #[test]
    fn netpbm_headers() {
        let a = ints(&[2, 3], &[0, 1, 2, 3, 4, 5]);
        let pgm = write(&a, Format::Pgm, &Options::default());
        assert_eq!(pgm.as_deref().map(|b| &b[..11]), Ok(&b"P5\n3 2\n255\n"[..]));
        assert_eq!(pgm.map(|b| b.len()), Ok(11 + 6));
        let ppm = write(&a, Format::Ppm, &Options::default());
        assert_eq!(ppm.as_deref().map(|b| &b[..11]), Ok(&b"P6\n3 2\n255\n"[..]));
        assert_eq!(ppm.map(|b| b.len()), Ok(11 + 18));
        let viridis = Options {
            range: None,
            colormap: Some(Colormap::Viridis),
        };
        assert!(write(&a, Format::Pgm, &viridis).is_err());
    }

    #[test]
    fn extensions() {
        assert_eq!(Format::of_path(Path::new("a/b.PNG")), Some(Format::Png));
        assert_eq!(Format::of_path(Path::new("b.pgm")), Some(Format::Pgm));
        assert_eq!(Format::of_path(Path::new("b.ppm")), Some(Format::Ppm));
        assert_eq!(Format::of_path(Path::new("b.npy")), None);
        assert_eq!(Format::of_path(Path::new("png")), None);
    }
}
