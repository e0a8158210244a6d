// The standalone viewer for exported pages (src/standalone.ts, compiled to lib/ by tsc): one script exposing
// the global `rlmnbViewer`, and the extension's style sheet beside it, in ../rlmnb/labextension (the build
// output that the wheel ships), where rlmnb.views._page reads them.
const fs = require('fs');
const path = require('path');
const webpack = require('webpack');

const out = path.resolve(__dirname, '../rlmnb/labextension');
webpack({
  mode: 'production',
  target: 'web',
  devtool: false,
  entry: path.resolve(__dirname, 'lib/standalone.js'),
  output: { path: out, filename: 'viewer.js', library: { name: 'rlmnbViewer', type: 'var' } }
}, (err, stats) => {
  if (err || stats.hasErrors()) {
    console.error(err || stats.toString('errors-only'));
    process.exit(1);
  }
  fs.copyFileSync(path.resolve(__dirname, 'style/index.css'), path.join(out, 'viewer.css'));
});
