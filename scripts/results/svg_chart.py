"""A line chart as plain SVG, for the plots of docs/bench (no plotting library is packaged for the
machines these scripts run on): x on a log2 scale, y linear from 0, grid lines, dashed reference
lines, series of points joined by lines, a legend on the right."""
import math


class LineChart:
    def __init__(self, title, x_values, x_label, y_high, y_ticks, y_format,
                 width=800, height=420, margins=(70, 260, 40, 60)):
        self.width, self.height = width, height
        self.left, right, self.top, bottom = margins
        self.plot_w, self.plot_h = width - self.left - right, height - self.top - bottom
        self.x_low, self.x_high = math.log2(min(x_values)), math.log2(max(x_values))
        self.y_high = y_high
        self.legend_y = self.top + 10
        self.out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                    f'font-family="sans-serif" font-size="12">',
                    f'<rect width="{width}" height="{height}" fill="white"/>',
                    f'<text x="{self.left}" y="22" font-size="14">{title}</text>']
        for tick in y_ticks:
            y = self.y_of(tick)
            self.out.append(f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.left + self.plot_w}" '
                            f'y2="{y:.1f}" stroke="#e5e5e5"/>')
            self.out.append(f'<text x="{self.left - 8}" y="{y + 4:.1f}" text-anchor="end">'
                            f'{y_format(tick)}</text>')
        self.x_ticks, self.x_label = sorted(x_values), x_label

    def x_of(self, value):
        return self.left + (math.log2(value) - self.x_low) / (self.x_high - self.x_low) * self.plot_w

    def y_of(self, value):
        return self.top + (1 - value / self.y_high) * self.plot_h

    def reference(self, value, label, colour):
        """A dotted horizontal line at `value`, labelled at its right end."""
        y = self.y_of(value)
        self.out.append(f'<line x1="{self.left}" y1="{y:.1f}" x2="{self.left + self.plot_w}" '
                        f'y2="{y:.1f}" stroke="{colour}" stroke-dasharray="1 3"/>')
        self.out.append(f'<text x="{self.left + self.plot_w - 4}" y="{y - 4:.1f}" text-anchor="end" '
                        f'fill="{colour}">{label}</text>')

    def series(self, points, label, colour, dash=""):
        """Points (x, y) joined by a line, with a legend entry; nothing for no points."""
        if not points:
            return
        points = sorted(points)
        path = " ".join(f"{self.x_of(x):.1f},{self.y_of(y):.1f}" for x, y in points)
        # An empty stroke-dasharray is not valid SVG: solid lines go without one.
        dashes = f' stroke-dasharray="{dash}"' if dash else ""
        self.out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"'
                        f'{dashes}/>')
        for x, y in points:
            self.out.append(f'<circle cx="{self.x_of(x):.1f}" cy="{self.y_of(y):.1f}" r="2.5" '
                            f'fill="{colour}"/>')
        lx = self.left + self.plot_w + 15
        self.out.append(f'<line x1="{lx}" y1="{self.legend_y}" x2="{lx + 28}" y2="{self.legend_y}" '
                        f'stroke="{colour}" stroke-width="2"{dashes}/>')
        self.out.append(f'<text x="{lx + 34}" y="{self.legend_y + 4}">{label}</text>')
        self.legend_y += 20

    def axes(self, x_tick_format):
        """The x ticks, the x label and the two axes."""
        for value in self.x_ticks:
            self.out.append(f'<text x="{self.x_of(value):.1f}" y="{self.top + self.plot_h + 18}" '
                            f'text-anchor="middle">{x_tick_format(value)}</text>')
        self.out.append(f'<text x="{self.left + self.plot_w / 2}" y="{self.height - 18}" '
                        f'text-anchor="middle">{self.x_label}</text>')
        bottom = self.top + self.plot_h
        self.out.append(f'<line x1="{self.left}" y1="{bottom}" x2="{self.left + self.plot_w}" '
                        f'y2="{bottom}" stroke="black"/>')
        self.out.append(f'<line x1="{self.left}" y1="{self.top}" x2="{self.left}" y2="{bottom}" '
                        f'stroke="black"/>')

    def write(self, path):
        with open(path, "w") as f:
            f.write("\n".join(self.out + ["</svg>"]) + "\n")
