/**
 * rlmnb-jupyterlab: shows rlmnb run trajectories in JupyterLab without a kernel.
 *
 * A MIME renderer for application/vnd.rlmnb.trajectory+json (the part of every rlmnb run output that
 * carries the recorded events) and a document viewer for exported trajectory files (*.rlmnb.json).
 *
 * Rank: ahead of the ipywidgets renderer (both -10, this one registered first). rlmnb adds the trajectory to a
 * run's output when the run has ended, and, marked as a snapshot (`"snapshot"`: its journal and the line that
 * continues it), now and then while it goes on. A snapshot beside a live widget's view shows that widget: this
 * renderer asks the notebook (plugin.ts, through HOST_EVENT) for its widget renderer and hosts it, keeping it
 * over later snapshots; where the widget is gone (a reopened notebook, a lost kernel) it shows the saved tree
 * and the way on instead of "model not found". At the end the final tree replaces the widget.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { Env } from './answer';
import { fold } from './fold';
import { trajectoryView } from './view';

export const MIME_TYPE = 'application/vnd.rlmnb.trajectory+json';
export const RANK = -10;
export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
/** Asked on a snapshot's node (bubbling to the document): plugin.ts sets `renderer` to the notebook's widget renderer. */
export const HOST_EVENT = 'rlmnb-host-widget';
export interface HostDetail {
  renderer: IRenderMime.IRenderer | null;
}
const WIDGET_WAIT_MS = 1500; // how long a snapshot waits for the live widget before it shows the saved tree

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
    this._liveBox = document.createElement('div');
    this._liveBox.className = 'rlmnb-live-host';
    this._liveBox.style.display = 'none';
    this._staticBox = document.createElement('div');
    this.node.append(this._liveBox, this._staticBox);
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data[this._mimeType] as any;
    const live = !!(data && typeof data === 'object' && data.snapshot && model.data[WIDGET_MIME]);
    this._data = data;
    if (live && this._hosted) { // a later snapshot of a run whose widget this view already hosts
      this._staticDrawn = false;
      this._toggle();
      return Promise.resolve();
    }
    this._unhost();
    this._staticBox.textContent = '';
    this._staticDrawn = false;
    if (!live) {
      this._drawStatic();
      return Promise.resolve();
    }
    this._model = model;
    this._staticBox.style.display = 'none'; // the widget usually shows within milliseconds: no flash of the tree
    if (this.isAttached) {
      this._host();
    }
    return Promise.resolve();
  }

  protected onAfterAttach(): void {
    if (this._model && !this._hosted) {
      this._host();
    }
  }

  dispose(): void {
    this._unhost();
    super.dispose();
  }

  /** Ask the notebook for its widget renderer and show the live widget in it (see the module docs). */
  private _host(): void {
    const model = this._model;
    this._model = null;
    const detail: HostDetail = { renderer: null };
    this.node.dispatchEvent(new CustomEvent(HOST_EVENT, { bubbles: true, detail }));
    const renderer = detail.renderer as (IRenderMime.IRenderer & Widget) | null;
    if (!renderer || !model) {
      this._drawStatic();
      return;
    }
    this._hosted = renderer;
    Widget.attach(renderer, this._liveBox);
    this._observer = new MutationObserver(() => this._toggle());
    this._observer.observe(renderer.node, { childList: true, subtree: true, attributes: true, attributeFilter: ['class'] });
    this._timer = window.setTimeout(() => { this._waited = true; this._toggle(); }, WIDGET_WAIT_MS);
    void renderer.renderModel(model).then(() => this._toggle());
  }

  /** The live widget where it renders, else (once it had its time) the saved tree and the way on. */
  private _toggle(): void {
    const hosted = this._hosted;
    const shown = !!hosted && !hosted.isHidden && !!hosted.node.querySelector('.rlmnb-widget');
    this._liveBox.style.display = shown ? '' : 'none';
    if (shown || !this._waited) {
      this._staticBox.style.display = 'none';
      return;
    }
    this._drawStatic();
  }

  private _unhost(): void {
    this._observer?.disconnect();
    this._observer = null;
    if (this._timer !== null) {
      window.clearTimeout(this._timer);
      this._timer = null;
    }
    this._waited = false;
    const hosted = this._hosted;
    this._hosted = null;
    if (hosted) {
      if (hosted.isAttached) {
        Widget.detach(hosted);
      }
      hosted.dispose();
    }
    this._liveBox.style.display = 'none';
  }

  private _drawStatic(): void {
    this._staticBox.style.display = '';
    if (this._staticDrawn) {
      return;
    }
    this._staticDrawn = true;
    this._staticBox.textContent = '';
    try {
      this._staticBox.appendChild(trajectoryView(fold(this._data), this._env));
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const box = document.createElement('div');
      box.className = 'rlmnb-unreadable';
      box.textContent = `rlmnb: this trajectory cannot be shown (${message}).`;
      this._staticBox.appendChild(box);
    }
  }

  private _data: unknown = null;
  private _model: IRenderMime.IMimeModel | null = null;
  private _hosted: (IRenderMime.IRenderer & Widget) | null = null;
  private _observer: MutationObserver | null = null;
  private _timer: number | null = null;
  private _waited = false;
  private _staticDrawn = false;
  private _staticBox: HTMLElement;
  private _liveBox: HTMLElement;
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
