FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY portal portal
COPY budgets budgets
COPY scheduling scheduling
COPY benchmarks benchmarks
COPY templates templates
COPY static static
COPY manage.py ./
# The scheduling pass and the simulator's engine compiled with Cython (scheduling/compile.py); the
# compiler is removed again, the compiled modules need only libc.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir '.[compiled]' && (python -m scheduling.compile || echo 'runs as plain Python') \
    && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/*
RUN SECRET_KEY=build python manage.py collectstatic --noinput -v 0 && useradd --system --home /app portal && mkdir -p /app/var && chown portal /app/var
USER portal
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
