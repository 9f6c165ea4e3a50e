# NumPy check for examples/fft.remora: numpy.fft.fft of a 16-point complex
# signal; prints [re im] per frequency.
import numpy as np

f32 = np.float32
t = np.arange(16, dtype=f32)
re = np.cos(f32(0.7) * t) + f32(0.5) * np.sin(f32(2.3) * t)
im = f32(0.3) * np.cos(f32(1.1) * t)
spectrum = np.fft.fft(re.astype(np.float64) + 1j * im.astype(np.float64))

print(" ".join(repr(float(v)) for z in spectrum for v in (z.real, z.imag)))
