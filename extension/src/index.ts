/**
 * rlmnb-jupyterlab: shows rlmnb run trajectories in JupyterLab without a kernel.
 *
 * A MIME renderer for application/vnd.rlmnb.trajectory+json (the part of every rlmnb run output that
 * carries the recorded events) and a document viewer for exported trajectory files (*.rlmnb.json).
 *
 * Rank: below the ipywidgets renderer (0). rlmnb adds the trajectory to a run's output only when the run has
 * ended, so the live widget shows while a run is going and this view replaces it at the end; a saved
 * notebook then shows the full tree after a reload, where the widget alone would say "model not found".
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { Env } from './answer';
import { fold } from './fold';
import { trajectoryView } from './view';

export const MIME_TYPE = 'application/vnd.rlmnb.trajectory+json';
export const RANK = -10;

export class TrajectoryRenderer extends Widget implements IRenderMime.IRenderer {
  constructor(options: IRenderMime.IRendererOptions) {
    super();
    this._mimeType = options.mimeType;
    this.addClass('rlmnb-Trajectory');
    const parser = options.markdownParser;
    const sanitizer = options.sanitizer;
    this._env = parser && sanitizer
      ? { markdown: text => parser.render(text), sanitize: html => sanitizer.sanitize(html) }
      : {};
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType];
    this.node.textContent = '';
    try {
      this.node.appendChild(trajectoryView(fold(data), this._env));
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const box = document.createElement('div');
      box.className = 'rlmnb-unreadable';
      box.textContent = `rlmnb: this trajectory cannot be shown (${message}).`;
      this.node.appendChild(box);
    }
    return Promise.resolve();
  }

  private _mimeType: string;
  private _env: Env;
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  defaultRank: RANK,
  createRenderer: options => new TrajectoryRenderer(options)
};

const extension: IRenderMime.IExtension = {
  id: 'rlmnb-jupyterlab:trajectory',
  description: 'Renders rlmnb run trajectories without a kernel.',
  rendererFactory,
  rank: RANK,
  dataType: 'json',
  fileTypes: [
    {
      name: 'rlmnb-trajectory',
      displayName: 'rlmnb trajectory',
      mimeTypes: [MIME_TYPE],
      extensions: ['.rlmnb.json'],
      fileFormat: 'text'
    }
  ],
  documentWidgetFactoryOptions: {
    name: 'rlmnb trajectory',
    primaryFileType: 'rlmnb-trajectory',
    fileTypes: ['rlmnb-trajectory'],
    defaultFor: ['rlmnb-trajectory']
  }
};

export default extension;
