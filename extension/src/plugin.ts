/**
 * The one part of rlmnb-jupyterlab that needs the application: buttons in a run's view ("open as
 * DataFrame", "copy code to a new cell") ask for a code cell below the output they sit in. A MIME renderer
 * cannot reach the notebook, so the view dispatches a DOM event and this plugin, which can, inserts the cell.
 * It also installs the live widget's click handler (live.ts), whose insert buttons go the same way.
 *
 * Typed structurally (no @jupyterlab/application or notebook packages): it only walks the shell's main
 * widgets to the notebook holding the clicked output and uses the notebook model's shared cell list.
 */

import { INSERT_EVENT, InsertDetail, insertedCode } from './format';
import { HOST_EVENT, HostDetail, WIDGET_MIME } from './index';
import { installLiveButtons } from './live';

interface CellLike {
  node: HTMLElement;
  model: { sharedModel: { getSource(): string } };
}

interface RenderMimeLike {
  mimeTypes: readonly string[];
  createRenderer(mimeType: string): unknown;
}

interface NotebookLike {
  widgets: readonly CellLike[];
  rendermime?: RenderMimeLike;
  activeCellIndex: number;
  model: { sharedModel: { insertCell(index: number, cell: { cell_type: string; source: string }): unknown } } | null;
}

interface AppLike {
  shell: { widgets(area: string): Iterable<{ node: HTMLElement; content?: unknown; context?: { path?: string } }> };
}

/** The variable holding a %%rlm cell's run: its -o/--out NAME, else _rlm (the last run of the kernel). */
export function runVariable(source: string): string {
  const first = source.split('\n', 1)[0];
  if (!/^\s*%%rlm\b/.test(first)) {
    return '_rlm';
  }
  const match = /(?:^|\s)(?:-o|--out)(?:\s+|=)["']?([A-Za-z_][A-Za-z0-9_]*)/.exec(first);
  return match ? match[1] : '_rlm';
}

function notebookOf(app: AppLike, target: HTMLElement): { notebook: NotebookLike; path: string } | null {
  for (const widget of app.shell.widgets('main')) {
    const content = widget.content as NotebookLike | undefined;
    if (content && Array.isArray(content.widgets) && widget.node.contains(target) && content.model) {
      return { notebook: content, path: widget.context?.path ?? '' };
    }
  }
  return null;
}

function insertBelow(app: AppLike, event: Event): void {
  const target = event.target as HTMLElement | null;
  const detail = (event as CustomEvent<InsertDetail>).detail;
  if (!target || !detail || typeof detail.code !== 'string') {
    return;
  }
  const found = notebookOf(app, target);
  const notebook = found?.notebook;
  if (!found || !notebook || !notebook.model) {
    return; // not in a notebook: the view copies the code instead
  }
  const index = notebook.widgets.findIndex(cell => cell.node.contains(target));
  if (index < 0) {
    return;
  }
  const variable = runVariable(notebook.widgets[index].model.sharedModel.getSource());
  const code = insertedCode(detail.code, variable, detail.runId, found.path);
  notebook.model.sharedModel.insertCell(index + 1, { cell_type: 'code', source: code });
  notebook.activeCellIndex = index + 1;
  detail.handled = true;
}

/** A run snapshot's view asks for its notebook's widget renderer (index.ts hosts the live widget in it). */
function hostWidget(app: AppLike, event: Event): void {
  const target = event.target as HTMLElement | null;
  const detail = (event as CustomEvent<HostDetail>).detail;
  if (!target || !detail) {
    return;
  }
  const rendermime = notebookOf(app, target)?.notebook.rendermime;
  if (rendermime && rendermime.mimeTypes.includes(WIDGET_MIME)) {
    detail.renderer = rendermime.createRenderer(WIDGET_MIME) as HostDetail['renderer'];
  }
}

const plugin = {
  id: 'rlmnb-jupyterlab:insert-cell',
  description: 'Inserts the code cells that rlmnb run views ask for (open as DataFrame, copy code to a new cell) and handles the live widget\'s copy and insert buttons.',
  autoStart: true,
  activate: (app: AppLike): void => {
    document.addEventListener(INSERT_EVENT, event => insertBelow(app, event));
    document.addEventListener(HOST_EVENT, event => hostWidget(app, event));
    installLiveButtons(document); // the live widget's buttons (live.ts), through the same insert path
  }
};

export default plugin;
