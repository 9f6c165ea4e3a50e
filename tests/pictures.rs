//! Pictures: `remora run … --output FILE.png` (and `.pgm`, `.ppm`). The
//! examples' own commands (read from their leading comments) write PNGs
//! that are read back with the `png` crate and checked pixel by pixel
//! where the picture is known.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("remora-pictures-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fn remora(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_remora"))
        .env("XDG_CACHE_HOME", concat!(env!("CARGO_TARGET_TMPDIR"), "/cache"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap_or_else(|e| Output {
            status: std::process::ExitStatus::default(),
            stdout: Vec::new(),
            stderr: e.to_string().into_bytes(),
        })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The command an example's leading comment gives for its picture
/// (`;   remora run examples/NAME.remora … --output FILE …`), its
/// arguments after `remora`, with the output file moved into `dir`.
fn picture_command(example: &str, dir: &Path) -> Result<Vec<String>, String> {
    let path = root().join("examples").join(format!("{example}.remora"));
    let source = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let wanted = format!("remora run examples/{example}.remora");
    let line = source
        .lines()
        .take_while(|l| l.starts_with(';') || l.trim().is_empty())
        .find_map(|l| {
            l.trim_start_matches(';')
                .trim()
                .strip_prefix("remora ")
                .map(str::to_string)
        })
        .filter(|l| format!("remora {l}").starts_with(&wanted))
        .ok_or_else(|| format!("no `{wanted} …` in the leading comment of {}", path.display()))?;
    let mut args: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let at = args
        .iter()
        .position(|a| a == "--output")
        .ok_or_else(|| format!("no --output in `{line}`"))?;
    let file = args.get(at + 1).ok_or("--output without a file")?;
    args[at + 1] = dir.join(file).to_string_lossy().into_owned();
    Ok(args)
}

/// A decoded PNG: width, height, color type, pixels.
struct Png {
    width: u32,
    height: u32,
    color: png::ColorType,
    pixels: Vec<u8>,
}

impl Png {
    fn channels(&self) -> usize {
        match self.color {
            png::ColorType::Rgb => 3,
            _ => 1,
        }
    }

    /// The pixel at `row`, `column`.
    fn at(&self, row: usize, column: usize) -> Vec<u8> {
        let c = self.channels();
        let i = (row * self.width as usize + column) * c;
        self.pixels.get(i..i + c).map(<[u8]>::to_vec).unwrap_or_default()
    }
}

fn read_png(path: &Path) -> Result<Png, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let mut pixels = vec![0; reader.output_buffer_size().ok_or("no buffer size")?];
    let info = reader.next_frame(&mut pixels).map_err(|e| e.to_string())?;
    if info.bit_depth != png::BitDepth::Eight {
        return Err(format!("bit depth {:?}", info.bit_depth));
    }
    pixels.truncate(info.buffer_size());
    Ok(Png {
        width: info.width,
        height: info.height,
        color: info.color_type,
        pixels,
    })
}

/// Runs an example's picture command and reads the PNG it wrote.
fn example_picture(example: &str) -> Result<Png, String> {
    let dir = scratch(example);
    let args = picture_command(example, &dir)?;
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = remora(&refs);
    if !out.status.success() {
        return Err(format!("remora {}: {}", args.join(" "), text(&out.stderr)));
    }
    let at = args.iter().position(|a| a == "--output").unwrap_or(0);
    let picture = read_png(Path::new(&args[at + 1]));
    let _ = std::fs::remove_dir_all(&dir);
    picture
}

const VIRIDIS_FIRST: [u8; 3] = [68, 1, 84];
const VIRIDIS_LAST: [u8; 3] = [253, 231, 37];

#[test]
fn mandelbrot_example_picture() -> Result<(), String> {
    let p = example_picture("mandelbrot")?;
    assert_eq!((p.width, p.height, p.color), (32, 16, png::ColorType::Rgb));
    // Inside the set (50 steps, the largest count): the last colour.
    assert_eq!(p.at(7, 10), VIRIDIS_LAST);
    assert_eq!(p.at(8, 20), VIRIDIS_LAST);
    // The corner escapes at once (1, the smallest): the first colour.
    assert_eq!(p.at(0, 0), VIRIDIS_FIRST);
    Ok(())
}

#[test]
fn life_example_picture() -> Result<(), String> {
    let p = example_picture("life")?;
    assert_eq!((p.width, p.height, p.color), (12, 12, png::ColorType::Grayscale));
    // The glider across the corner and the blinker, live: white.
    for (row, column) in [(0, 1), (1, 0), (1, 1), (1, 11), (11, 0), (4, 3), (4, 4), (4, 5)] {
        assert_eq!(p.at(row, column), [255], "{row} {column}");
    }
    assert_eq!(p.at(0, 0), [0]);
    assert_eq!(p.pixels.iter().filter(|g| **g == 255).count(), 8);
    assert_eq!(p.pixels.iter().filter(|g| **g == 0).count(), 144 - 8);
    Ok(())
}

#[test]
fn rule30_example_picture() -> Result<(), String> {
    let p = example_picture("rule30")?;
    assert_eq!((p.width, p.height, p.color), (31, 16, png::ColorType::Grayscale));
    assert_eq!(p.at(0, 15), [255]);
    assert_eq!(p.at(0, 14), [0]);
    assert_eq!(p.at(15, 0), [255]);
    Ok(())
}

#[test]
fn blend_example_picture_is_rgb() -> Result<(), String> {
    let p = example_picture("blend")?;
    assert_eq!((p.width, p.height, p.color), (8, 8, png::ColorType::Rgb));
    // At the left edge, image A (its top-left pixel is [0 0 255]); at the
    // right edge, image B (a dark square of the checkerboard: [0 0 64]).
    assert_eq!(p.at(0, 0), [0, 0, 255]);
    assert_eq!(p.at(0, 7), [0, 0, 64]);
    assert_eq!(p.at(1, 7), [255, 255, 255]);
    Ok(())
}

/// Writes `source` as a program in `dir` and runs it with `args` after it.
fn run_program(dir: &Path, source: &str, args: &[&str]) -> Output {
    let program = dir.join("p.remora");
    if let Err(e) = std::fs::write(&program, source) {
        return Output {
            status: std::process::ExitStatus::default(),
            stdout: Vec::new(),
            stderr: e.to_string().into_bytes(),
        };
    }
    let program = program.to_string_lossy().into_owned();
    let mut all = vec!["run", program.as_str()];
    all.extend_from_slice(args);
    remora(&all)
}

#[test]
fn a_range_fixes_black_and_white() -> Result<(), String> {
    let dir = scratch("range");
    let out_file = dir.join("r.png");
    let out_path = out_file.to_string_lossy().into_owned();
    let source = "(entry (main) [[-1 0 1 2 3 4]])";
    let out = run_program(&dir, source, &["--output", &out_path, "--range", "0", "2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let p = read_png(&out_file)?;
    assert_eq!((p.width, p.height, p.color), (6, 1, png::ColorType::Grayscale));
    assert_eq!(p.pixels, [0, 0, 128, 255, 255, 255]);
    // Without it: from the smallest to the largest.
    let out = run_program(&dir, source, &["--output", &out_path]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(read_png(&out_file)?.pixels, [0, 51, 102, 153, 204, 255]);
    // A negative end, after the program's arguments' place.
    let out = run_program(&dir, source, &["--output", &out_path, "--range", "-1", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(read_png(&out_file)?.pixels, [0, 128, 255, 255, 255, 255]);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn pgm_and_ppm_headers() -> Result<(), String> {
    let dir = scratch("netpbm");
    let source = "(entry (main) [[0 1 2] [3 4 5]])";
    let pgm = dir.join("a.pgm");
    let out = run_program(&dir, source, &["--output", &pgm.to_string_lossy()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(&pgm).map_err(|e| e.to_string())?;
    assert_eq!(bytes, b"P5\n3 2\n255\n\x00\x33\x66\x99\xcc\xff");
    let ppm = dir.join("a.ppm");
    let out = run_program(&dir, source, &["--output", &ppm.to_string_lossy()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(&ppm).map_err(|e| e.to_string())?;
    assert!(bytes.starts_with(b"P6\n3 2\n255\n"));
    assert_eq!(bytes.len(), 11 + 3 * 6);
    assert_eq!(bytes[11..14], [0; 3]);
    assert_eq!(bytes[bytes.len() - 3..], [255, 255, 255]);
    // A colormap makes RGB: PPM holds it, PGM does not.
    let out = run_program(
        &dir,
        source,
        &["--output", &ppm.to_string_lossy(), "--colormap", "viridis"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(&ppm).map_err(|e| e.to_string())?;
    assert_eq!(bytes[11..14], VIRIDIS_FIRST);
    assert_eq!(bytes[bytes.len() - 3..], VIRIDIS_LAST);
    let out = run_program(
        &dir,
        source,
        &["--output", &pgm.to_string_lossy(), "--colormap", "viridis"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("error: a .pgm image is grayscale"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn an_array_of_rows_of_pixels_is_rgb() -> Result<(), String> {
    let dir = scratch("rgb");
    let file = dir.join("c.png");
    let path = file.to_string_lossy().into_owned();
    // Floats in [0, 1], clamped.
    let out = run_program(
        &dir,
        "(entry (main) [[[1.0 0.5 0.0] [-1.0 0.0 2.0]]])",
        &["--output", &path],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let p = read_png(&file)?;
    assert_eq!((p.width, p.height, p.color), (2, 1, png::ColorType::Rgb));
    assert_eq!(p.pixels, [255, 128, 0, 0, 0, 255]);
    // Ints in [0, 255], clamped.
    let out = run_program(
        &dir,
        "(entry (main) [[[255 -5 300] [1 2 3]]])",
        &["--output", &path],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(read_png(&file)?.pixels, [255, 0, 255, 1, 2, 3]);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn a_wrong_shape_is_an_error_and_leaves_the_file_alone() {
    let dir = scratch("shape");
    let file = dir.join("v.png");
    let _ = std::fs::write(&file, b"before");
    let path = file.to_string_lossy().into_owned();
    for (source, shape) in [
        ("(entry (main) [1 2 3])", "[3]"),
        ("(entry (main) [[[1 2 3 4]]])", "[1 1 4]"),
        ("(entry (main) 7)", "[]"),
    ] {
        let out = run_program(&dir, source, &["--output", &path]);
        assert_eq!(out.status.code(), Some(1), "{source}");
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "error: an image is a [h w] array (grayscale) or a [h w 3] array (RGB), not one of shape {shape}"
            )),
            "{err}"
        );
        assert_eq!(std::fs::read(&file).ok().as_deref(), Some(&b"before"[..]));
    }
    let out = run_program(&dir, "(entry (main) [[1 2]])", &["--colormap", "viridis"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: --range and --colormap apply to a picture --output"));
    let out = run_program(
        &dir,
        "(entry (main) [[1 2]])",
        &["--output", &path, "--range", "2", "1"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: --range 2 1: the low end must be below the high end"));
    assert_eq!(std::fs::read(&file).ok().as_deref(), Some(&b"before"[..]));
    let _ = std::fs::remove_dir_all(&dir);
}
