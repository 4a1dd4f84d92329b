import { defineConfig } from 'vite'
import react from '@vitejs/plugin-react'

// `npm run dev` proxies the API to a `dhub serve` started separately (DHUB_URL, default
// http://127.0.0.1:8000); `npm run build` writes into the Python package, which serves it at /.
declare const process: { env: Record<string, string | undefined> } // no @types/node for one variable
const target = process.env.DHUB_URL ?? 'http://127.0.0.1:8000'

export default defineConfig({
  plugins: [react()],
  base: './',
  build: {
    outDir: '../src/dhub/api/console',
    emptyOutDir: true,
    chunkSizeWarningLimit: 1000,
  },
  server: {
    proxy: {
      '/api': { target, changeOrigin: false },
      '/healthz': { target },
    },
  },
})
