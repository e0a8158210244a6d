/**
 * The viewer outside JupyterLab: the same view of a trajectory (meters, trace panel with search, sort, filter
 * and timeline, copy buttons, the tree), for a page with no kernel and no network. `rlmnb.views._page`
 * inlines this bundle (built by viewer.build.js as the global `rlmnbViewer`), the extension's style sheet and
 * the trajectories into one HTML file.
 */

import { Env } from './answer';
import { fold } from './fold';
import { trajectoryView } from './view';

/** The class of a view outside a notebook (an exported page), where nothing can insert a cell. */
export const STANDALONE = 'rlmnb-standalone';

/**
 * Draw the trajectory `data` into `root` (its content, a script-free fallback, is replaced). `markdown` maps an
 * answer's text to its HTML, rendered by rlmnb with raw HTML turned off (answers may quote hostile data).
 */
export function render(data: unknown, root: HTMLElement, markdown: { [text: string]: string } = {}): void {
  const env: Env = {
    markdown: text => (text in markdown ? Promise.resolve(markdown[text]) : Promise.reject(new Error('no HTML'))),
    sanitize: html => html
  };
  const view = trajectoryView(fold(data), env);
  view.classList.add(STANDALONE); // no notebook here: the buttons that insert a cell are hidden (index.css)
  root.textContent = '';
  root.appendChild(view);
}
