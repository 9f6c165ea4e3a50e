# NumPy check for examples/convolution.remora: circular convolution of a
# 16-sample signal with a 4-tap filter, through the FFT (the Remora program
# prints it twice, computed by rotation and by windows).
import numpy as np

f32 = np.float32
t = np.arange(16, dtype=f32)
x = np.sin(f32(0.4) * t) + f32(0.5) * np.cos(f32(1.3) * t)
w = np.array([0.4, 0.3, 0.2, 0.1], dtype=f32)

w_padded = np.zeros(16, dtype=f32)
w_padded[:4] = w
y = np.real(np.fft.ifft(np.fft.fft(x) * np.fft.fft(w_padded)))

print(" ".join(repr(float(v)) for v in np.concatenate([y, y])))
